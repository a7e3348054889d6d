"""Shared helpers of the tests (no tests here), imported as ``support.<module>``: tests/ is on sys.path (pyproject.toml,
``[tool.pytest.ini_options] pythonpath``). Some also run as scripts in a process of their own (strangers.py,
fake_openai_server.py, flaky_openai_server.py, turtlesim_watch.py, experiment_fixtures.py)."""
