# Two entry points on a fresh machine:
#   make demo   set up .venv and run the reference study (opscope demo)
#   make test   set up .venv with the test extras and run lint, types and the whole suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# The pinned CPU torch wheel lies in /opt/wheels on our machines; elsewhere pip uses the index.
FIND_LINKS := $(if $(wildcard /opt/wheels),--find-links /opt/wheels,)
PIP_INSTALL := $(BIN)/python -m pip install --disable-pip-version-check -q -c constraints.txt $(FIND_LINKS)

.PHONY: demo test lint typecheck unit clean help

help:
	@echo "make demo   - create .venv, install opscope, run 'opscope demo'"
	@echo "make test   - create .venv, install test extras, run ruff, mypy and pytest"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: $(BIN)/python pyproject.toml setup.py constraints.txt src/opscope/trace/_scan.c src/opscope/trace/_args.c src/opscope/analysis/critical/_longest.c src/opscope/analysis/critical/_chains.c src/opscope/analysis/critical/_pieces.c
	$(PIP_INSTALL) -e ".[torch]"
	@touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(PIP_INSTALL) -e ".[torch,test]"
	@touch $@

demo: $(VENV)/.installed
	$(BIN)/opscope demo $(ARGS)

lint: $(VENV)/.installed-test
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(VENV)/.installed-test
	$(BIN)/mypy

unit: $(VENV)/.installed-test
	$(BIN)/python -m pytest tests/unit -q

# pytest-xdist: the suite in PYTEST_WORKERS processes (0: all in this one), each test file whole
# in one worker (its module fixtures, such as a real gloo job, run once); PYTEST_ARGS adds to it.
# Tests marked `timing` (real jobs whose findings rest on the relative times of their work: a
# straggler above the job's noise, a loader on the path) then run alone, in one process, so that
# no other file's work shares their cores. Exit status 5 is pytest's "nothing selected".
PYTEST_WORKERS ?= 2
test: lint typecheck
ifeq ($(PYTEST_WORKERS),0)
	$(BIN)/python -m pytest $(PYTEST_ARGS)
else
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile -m "not timing" $(PYTEST_ARGS) || [ $$? -eq 5 ]
	$(BIN)/python -m pytest -m timing $(PYTEST_ARGS) || [ $$? -eq 5 ]
endif

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
