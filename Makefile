# redstring: the commands a developer and CI run. See README.md.
#   make test        everything: lint, types, import layers, all tests (starts the local stack)
#   make test-fast   the tests that need no servers
#   make test-services  the tests that need Kafka, Neo4j and Postgres
#   make soak        the worker-loop simulation over thousands of fresh seeds (no servers;
#                    REDSTRING_SIM_SEEDS, default 3000)
#   make demo        start the local stack and run the pipeline end to end
#   make package-check  build the sdist and wheel, install the wheel in a clean venv, run it
#   make lock        refresh requirements/*.lock from pyproject.toml (UPGRADE=1: newest that fit)
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.redstring-installed

.PHONY: venv lock package-check lint test test-fast test-services soak fuzz demo stack-demo stack-up stack-down stack-status

venv: $(STAMP)

# Reinstall only when pyproject.toml or the lock changed since the last install.
# Every dependency comes from the lock, with its hashes; the project itself is
# then built with the locked setuptools (no build isolation, so nothing unlocked).
$(STAMP): pyproject.toml requirements/dev.lock
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@# The distribution was called `redstring` before it became redstring-projector.
	@! $(BIN)/python -m pip show --quiet redstring 2>/dev/null || $(BIN)/python -m pip uninstall --quiet --yes redstring
	$(BIN)/python -m pip install --quiet --require-hashes -r requirements/dev.lock
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	@touch $(STAMP)

# The locks, from pyproject.toml and requirements/build.in, for Python 3.11 on
# Linux, with the hashes of every file of each version: dev.lock (the dev extra,
# which includes runtime and devstack) for the venv and CI, runtime.lock (the
# runtime extra, at the same versions) for the image and .ci/package-check.
# Versions already locked are kept while they fit; `make lock UPGRADE=1` takes the
# newest that fit. Needs the package index.
UV_COMPILE = $(BIN)/uv pip compile --quiet --generate-hashes --python-version 3.11 \
	--python-platform linux --custom-compile-command 'make lock' $(if $(UPGRADE),--upgrade)

lock: venv
	$(UV_COMPILE) pyproject.toml requirements/build.in --extra dev -o requirements/dev.lock
	$(UV_COMPILE) pyproject.toml requirements/build.in --extra runtime \
		-c requirements/dev.lock -o requirements/runtime.lock

package-check: venv
	bash .ci/package-check

lint: venv
	$(BIN)/ruff check contracts projections adapters streams tests devstack
	$(BIN)/mypy
	$(BIN)/lint-imports

# Two pytest runs, because hypothesis binds a test's settings when it is defined:
# the fast layer under the default profile, then everything that needs servers
# under the "services" profile (no deadline, 25 examples a property). pytest
# starts the local stack when the first test needs it and stops it at the end,
# pass or fail (tests/services.py). Exit status 5 (nothing collected) is not a
# failure here.
PYTEST_OK = status=$$?; if [ $$status -eq 5 ]; then echo "pytest: no tests collected"; exit 0; fi; exit $$status

test: lint test-fast test-services

test-fast: venv
	@$(BIN)/pytest -m "not services"; $(PYTEST_OK)

test-services: venv
	@REDSTRING_HYPOTHESIS_PROFILE=services $(BIN)/pytest -m services --durations=25; $(PYTEST_OK)

# The worker loop under a simulated Kafka and Faust with crashes, rebalances,
# zombies, lost seeks and duplicates (tests/simulation): fresh random seeds each
# run, a summary of what was injected at the end. A failure prints its seed and
# the shrunk workload.
soak: venv
	@REDSTRING_SIM_SEEDS=$${REDSTRING_SIM_SEEDS:-3000} REDSTRING_SIM_TENANTS=$${REDSTRING_SIM_TENANTS:-16} \
	REDSTRING_SIM_PARTITIONS=$${REDSTRING_SIM_PARTITIONS:-3} $(BIN)/pytest tests/simulation/test_simulation.py -s -q -p no:cacheprovider -k converges --hypothesis-show-statistics
	@# Wide: up to 40 tenants on 6 partitions of one or two workers, the shape
	@# that found seek remnants refilling the queue (tests/unit/streams/test_loop.py).
	@REDSTRING_SIM_SEEDS=$${REDSTRING_SIM_WIDE_SEEDS:-1000} REDSTRING_SIM_TENANTS=40 \
	REDSTRING_SIM_PARTITIONS=6 $(BIN)/pytest tests/simulation/test_simulation.py -s -q -p no:cacheprovider -k converges
	@# Deep: up to 4 tenants of up to 40 steps each on one partition, many
	@# replays rescanning it, the shape that found sub-batches losing a seek's
	@# reason (tests/unit/streams/test_loop.py, "sub-batches"; make test runs
	@# 60 fixed ones, test_deep_histories_quiesce_under_faults).
	@REDSTRING_SIM_SEEDS=$${REDSTRING_SIM_DEEP_SEEDS:-300} REDSTRING_SIM_TENANTS=4 \
	REDSTRING_SIM_PARTITIONS=1 REDSTRING_SIM_STEPS=40 $(BIN)/pytest tests/simulation/test_simulation.py -s -q -p no:cacheprovider -k converges

# The fast layer's properties (hostile bytes, folds against the oracle,
# the stores' compliance in memory) with many more fresh examples each
# (REDSTRING_FUZZ_EXAMPLES, 1000 by default): about seven minutes here.
fuzz: venv
	@REDSTRING_HYPOTHESIS_PROFILE=fuzz $(BIN)/pytest -m "not services" -q -p no:cacheprovider --ignore=tests/simulation; $(PYTEST_OK)

# The pipeline end to end: the local stack, a topic, a worker, a history with
# merges and an unmerge, and what the stores answer afterwards.
demo: stack-up
	@set -a; . .devstack/env; set +a; \
	REDSTRING_CONTROL_KEY=$${REDSTRING_CONTROL_KEY:-demo-control-key} $(BIN)/redstring demo

# Only the three servers answering (no worker).
stack-demo: stack-up
	$(BIN)/python -m devstack.demo

# Same commands as `redstring dev up|down|status`, without importing the rest of the CLI.
stack-up: venv
	$(BIN)/python -m devstack up >/dev/null

stack-down: venv
	$(BIN)/python -m devstack down

stack-status: venv
	$(BIN)/python -m devstack status
