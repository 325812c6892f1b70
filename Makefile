# The two Quick-start commands: `make serve` and `make test` (see README.md).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SERVE_STAMP := $(VENV)/.installed-serve
PIP := $(BIN)/pip install --quiet --disable-pip-version-check

.PHONY: install install-serve system-deps serve test lint typecheck unit stress bench bench-gateway clean

## The service and the dev tools (lint, types, tests): `pip install -e ".[dev]"`.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) -e ".[dev]"
	touch $(STAMP) $(SERVE_STAMP)

## Only what `foureyes serve` needs: `pip install -e .` (no test or lint tools).
$(SERVE_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) -e .
	touch $(SERVE_STAMP)

install: $(STAMP)

install-serve: $(SERVE_STAMP)

## Debian packages the test suite needs (PostgreSQL server); no-op when present.
system-deps:
	bash scripts/system-deps.sh

## Install the slim set, then run the main job on the embedded default (offline routes, SQLite).
serve: install-serve
	$(BIN)/foureyes serve

lint: install
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: install
	$(BIN)/mypy src

## Two workers (pytest-xdist): every fixture is per worker (its own PostgreSQL, simulator,
## ports and tmp dirs), so the two halves share nothing.
unit: install
	$(BIN)/pytest -n 2

## Install everything, then run the whole suite: lint, types, tests.
test: install system-deps lint typecheck unit

## Not part of `test`: the fault matrix 20 times beside CPU hogs and event-loop stalls.
stress: install
	$(BIN)/python scripts/stress.py

bench: install
	$(BIN)/python benchmarks/transport.py
	$(BIN)/python benchmarks/store_commit.py

## The gateway against the bare SDK and NeMo Guardrails (its own venv); about 6 minutes.
bench-gateway: install
	bash benchmarks/nemo/setup.sh
	$(BIN)/python benchmarks/gateway.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
