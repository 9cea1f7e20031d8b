# The two commands a newcomer needs:  make demo   and   make test
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck bench clean system-deps

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,langgraph,postgres]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/ctxpolicy validate policies/
	$(BIN)/ctxpolicy show policies/base.yaml

lint: $(STAMP)
	$(BIN)/ruff check ctxpolicy tests examples benchmarks
	$(BIN)/mypy

system-deps:
	@bash tools/system-deps.sh

test: $(STAMP) system-deps lint
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
