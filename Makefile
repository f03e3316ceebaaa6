# redstring: the commands a developer and CI run. See README.md.
#   make test        everything: lint, types, import layers, all tests (starts the local stack)
#   make test-fast   the tests that need no servers
#   make demo        start the local stack and show the three services answering
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.redstring-installed

.PHONY: venv lint test test-fast demo stack-up stack-down stack-status

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

# pytest starts the local stack when the first test needs it and stops it at the
# end, pass or fail (tests/services.py). Exit status 5 (nothing collected) is not
# a failure here.
test: lint
	@$(BIN)/pytest; status=$$?; \
	if [ $$status -eq 5 ]; then echo "pytest: no tests collected"; exit 0; fi; exit $$status

test-fast: venv
	@$(BIN)/pytest -m "not services"; status=$$?; \
	if [ $$status -eq 5 ]; then echo "pytest: no tests collected"; exit 0; fi; exit $$status

demo: stack-up
	$(BIN)/python -m devstack.demo

# Same commands as `redstring dev up|down|status`, without importing the rest of the CLI.
stack-up: venv
	$(BIN)/python -m devstack up >/dev/null

stack-down: venv
	$(BIN)/python -m devstack down

stack-status: venv
	$(BIN)/python -m devstack status
