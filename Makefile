# DocQuery: the two commands are `make demo` and `make test` (both run setup when needed).
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_DIR := .docquery/demo
DEMO_Q ?= How many days do I have to submit an expense report?

.PHONY: setup demo test lint typecheck unit clean

# torch is pinned in the same pip command: unpinned, pip pulls a 5.5 GB CUDA build.
$(STAMP): pyproject.toml scripts/setup-tools.sh
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "torch==2.13.0" -e ".[dev]"
	bash scripts/setup-tools.sh
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	rm -rf $(DEMO_DIR)
	# Each folder of examples/ names its readers in a .docquery-acl.yaml (docs/ingestion.md).
	DOCQUERY_DATA_DIR=$(DEMO_DIR) $(BIN)/docquery ingest examples
	DOCQUERY_DATA_DIR=$(DEMO_DIR) $(BIN)/docquery ask "$(DEMO_Q)" --as-groups staff

lint: $(STAMP)
	$(BIN)/ruff check docquery ingest tests benchmarks
	$(BIN)/ruff format --check docquery ingest

typecheck: $(STAMP)
	$(BIN)/mypy

test: $(STAMP) lint typecheck
	HF_HUB_OFFLINE=1 $(BIN)/pytest -q

clean:
	rm -rf $(VENV) .venv-tools .docquery .pytest_cache .mypy_cache .ruff_cache
