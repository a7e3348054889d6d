"""The operator's seat (``consensus mcp``): policy (allowlist, approvals, the operator.jsonl record, untrusted text),
fleet (a running run as the seat sees it, its acts validated), server (the MCP server's tools and resources), cli,
supervisor (an LLM that may only read and e-stop). docs/operator.md."""
