"""The experiment runner: sweeps of trials over registered studies (``consensus experiment``, ``consensus report``).

* ``study``  — the contract between the runner and a study (``Study``, ``Trial``, ``TrialContext``, ``TrialFailed``);
* ``spec``   — sweep specs: load, validate, expand into trials with derived seeds;
* ``runner`` — worker pools, results.jsonl, resume, LLM record/replay;
* ``report`` — report.md and figures of a run directory;
* ``cli``    — the two commands (``register(subparsers)``, ``run(args)``).

Nothing is imported here, so a study importing ``consensus.experiments.study`` stays light.
"""
