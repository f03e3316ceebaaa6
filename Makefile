# redstring: the commands a developer and CI run. See README.md.
#   make test        everything: lint, types, import layers, all tests (starts the local stack)
#   make test-fast   the tests that need no servers
#   make test-services  the tests that need Kafka, Neo4j and Postgres
#   make soak        the worker-loop simulation over thousands of fresh seeds (no servers;
#                    REDSTRING_SIM_SEEDS, default 3000)
#   make demo        start the local stack and run the pipeline end to end
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.redstring-installed

.PHONY: venv lint test test-fast test-services soak demo stack-demo stack-up stack-down stack-status

venv: $(STAMP)

# Reinstall only when pyproject.toml changed since the last install.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

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
	@REDSTRING_HYPOTHESIS_PROFILE=services $(BIN)/pytest -m services; $(PYTEST_OK)

# The worker loop under a simulated Kafka and Faust with crashes, rebalances,
# zombies, lost seeks and duplicates (tests/simulation): fresh random seeds each
# run, a summary of what was injected at the end. A failure prints its seed and
# the shrunk workload.
soak: venv
	@REDSTRING_SIM_SEEDS=$${REDSTRING_SIM_SEEDS:-3000} REDSTRING_SIM_TENANTS=$${REDSTRING_SIM_TENANTS:-16} \
	REDSTRING_SIM_PARTITIONS=$${REDSTRING_SIM_PARTITIONS:-3} $(BIN)/pytest tests/simulation/test_simulation.py -s -q -p no:cacheprovider -k converges --hypothesis-show-statistics

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
