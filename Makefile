# DocQuery: the two commands are `make demo` and `make test` (both run setup when needed).
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_DIR := .docquery/demo
DEMO_Q ?= How many days do I have to submit an expense report?

.PHONY: setup bench-setup demo test lint typecheck imports unit lock clean

# torch's CPU wheel is not on PyPI. Where this kind of machine keeps it on disk it comes from there;
# anywhere else from the PyTorch CPU index. Either way the lock's hash decides which file is accepted.
TORCH_WHEELS := /opt/wheels
TORCH_SOURCE := $(if $(wildcard $(TORCH_WHEELS)/torch-2.13.0+cpu-*.whl),,--extra-index-url https://download.pytorch.org/whl/cpu)
PIP_INSTALL = $(BIN)/python -m pip install -q --require-hashes --no-deps $(TORCH_SOURCE)

# Installs exactly the hash-locked set (requirements/dev.txt: runtime + dev, torch's CPU build), then the
# project itself, without resolving anything (docs/dependencies.md); pip check then proves the set complete.
$(STAMP): requirements/dev.txt pyproject.toml scripts/setup-tools.sh
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(PIP_INSTALL) -r requirements/dev.txt
	$(BIN)/python -m pip check
	$(BIN)/python -m pip install -q --no-deps --no-build-isolation -e .
	bash scripts/setup-tools.sh
	touch $(STAMP)

setup: $(STAMP)

# The benchmarks' own extras (matplotlib, the llama-index comparison, pyinstrument): never part of `make setup`.
bench-setup: $(STAMP)
	$(PIP_INSTALL) -r requirements/bench.txt
	$(BIN)/python -m pip check

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

# The layering contracts in pyproject.toml ([tool.importlinter]).
imports: $(STAMP)
	$(BIN)/lint-imports

# Two workers, each taking whole files (module fixtures are built once): most of the suite's time is spent
# waiting on servers and subprocesses, so two share two cores well. TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 2
test: $(STAMP) lint typecheck imports
	HF_HUB_OFFLINE=1 $(BIN)/pytest -q $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)

# The fast tier: tests/unit but those marked slow, model or openbao. None starts a server or a subprocess
# (tests/unit/conftest.py fails one that does) or bounds wall-clock time.
unit: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/pytest -q tests/unit -m "not model and not openbao and not slow"

# Regenerates the hash-locked sets from pyproject.toml; pins already in them are kept unless
# UPGRADE="--upgrade" (or --upgrade-package NAME) is given. Needs PyPI and /opt/wheels.
# runtime.txt and bench.txt are resolved within dev.txt (its pins and its --find-links), so none disagree.
LOCK_FLAGS = --constraint requirements/constraints.txt --emit-find-links --generate-hashes \
	--python-version 3.11.7 --python-platform x86_64-manylinux_2_28 --custom-compile-command "make lock" -q
lock: $(STAMP)
	$(BIN)/uv pip compile pyproject.toml --extra dev --find-links /opt/wheels $(LOCK_FLAGS) $(UPGRADE) \
		-o requirements/dev.txt
	$(BIN)/uv pip compile pyproject.toml $(LOCK_FLAGS) --constraint requirements/dev.txt -o requirements/runtime.txt
	$(BIN)/uv pip compile pyproject.toml --extra dev --extra bench --find-links /opt/wheels $(LOCK_FLAGS) \
		--constraint requirements/dev.txt -o requirements/bench.txt

clean:
	rm -rf $(VENV) .venv-tools .docquery .pytest_cache .mypy_cache .ruff_cache
