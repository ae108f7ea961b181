# Two commands do all set-up on a fresh machine: `make serve` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.tauopt-installed
# torch is pinned and installed first: an unpinned torch pulls a multi-GB CUDA build.
TORCH := torch==2.13.0

.PHONY: serve test bench docs grpc-stubs venv clean

venv: $(STAMP)

# editable_mode=compat: a plain path in a .pth file, which mypy follows (the default
# mode's import hook hides tauopt from type checkers).
$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH)"
	$(PY) -m pip install --quiet -e ".[all,test,bench,ray,lightning,docs]" "$(TORCH)" --config-settings editable_mode=compat
	touch $(STAMP)

serve: $(STAMP)
	$(VENV)/bin/tauopt serve

# The suite on one worker more than the cores, up to 4 (pytest-xdist): many tests wait on the
# processes and servers they start, and the extra worker runs meanwhile. Each group of tests
# runs whole on one worker, a group being a file (so a module's shared daemon, pool or cluster
# is started once) or a part of a long file; the longest groups go first (tests/conftest.py).
# TEST_WORKERS=1 for one process.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); n=$$((n + 1)); [ "$$n" -gt 4 ] && n=4; echo $$n)
# Python's own bytecode cache (__pycache__, git-ignored) stays on even where the environment
# turns it off (PYTHONDONTWRITEBYTECODE, set in many containers): the suite starts hundreds of
# Python processes from this tree (daemons, CLI commands, chiefs, workers), and without it each
# one compiles tauopt's modules again (a fifth of the CPU of a file of CLI tests).
# Optuna's own storage tests run from its released sdist (tests/optuna_suite.py), fetched here
# once into a cache outside the tree: the tests themselves reach no network.
test: $(STAMP)
	$(PY) tests/optuna_suite.py --fetch-only
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder

# The documentation site (mkdocs.yml, docs/) into build/site; --strict: no broken link or reference.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# This run's tables, then where every benchmark target stands (the recorded figures;
# the same table as BENCHMARKS.md and the documentation's benchmarks page).
bench: $(STAMP)
	$(PY) benchmarks/contention.py --quick
	$(PY) benchmarks/report_latency.py --duration 3
	$(PY) benchmarks/standing.py

# Regenerates the committed gRPC code (KerasTuner and Optuna doors); tests/test_grpc_generated.py checks for drift.
grpc-stubs: $(STAMP)
	$(PY) -m tauopt.transport.grpc._regen

clean:
	rm -rf $(VENV)
