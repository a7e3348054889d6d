"""Tests of the documentation: every command in README.md and docs/*.md, and docs/architecture.md against the code."""
