# collabcausal developer entry points. `make demo` and `make test` need only Python >= 3.10.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# two stamps: `make demo` needs the runtime dependencies only; tests, lint and benchmarks the dev extras
RUNTIME := $(VENV)/.installed-runtime
STAMP   := $(VENV)/.installed
# setuptools warns on every editable install that a folder named like the package in the working
# directory would shadow it: that folder is the package itself here, so the warning is silenced.
PIP := PYTHONWARNINGS="ignore:Editable installation" $(BIN)/pip

.PHONY: demo test test-slow lint proto bench clean postgresql

$(RUNTIME): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(PIP) install --quiet -e .
	touch $(RUNTIME)

$(STAMP): $(RUNTIME)
	$(PIP) install --quiet -e ".[dev]"
	touch $(STAMP)

## demo: LaLonde 2x2 DC-QE table (paper 003, Table 3 layout) and report.html into results/; analytic
## intervals (the bootstrap is not valid for PSM; its 200 replicates give the bootstrap mean and figure)
demo: $(RUNTIME)
	$(BIN)/collabcausal simulate --dataset lalonde --bootstrap 200 --interval analytic --seed 0 --out results

## postgresql: the PostgreSQL server binaries the database-source tests start a throwaway cluster with
## (tests/postgres_server.py). Best effort: installed with apt-get as root; else those tests skip, saying why.
postgresql:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 \
	|| { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	     && (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null); } \
	|| echo "warning: could not install the postgresql package (needs root and apt-get); the PostgreSQL tests will be skipped" >&2

## test: the fast suite (slow reproductions excluded), plus lint; TEST_JOBS pytest-xdist workers, one test file
## each at a time (module fixtures such as the PostgreSQL server start once per file): about 13 minutes on 2 cores
## with 2 workers, 18 with TEST_JOBS=0 (one process)
TEST_JOBS ?= 2
test: $(STAMP) postgresql
	$(BIN)/ruff check collabcausal tests benchmarks scripts
	$(BIN)/python -m pytest -q -n $(TEST_JOBS) --dist loadfile

## test-slow: the full reproductions (paper-sized bootstrap, sweeps)
test-slow: $(STAMP) postgresql
	$(BIN)/python -m pytest -q -m slow

lint: $(STAMP)
	$(BIN)/ruff check collabcausal tests benchmarks scripts

## proto: regenerate the committed gRPC stubs from collabcausal/protocol/collabcausal.proto
proto: $(STAMP)
	$(BIN)/python -m collabcausal.protocol.codegen

bench: $(STAMP)
	for f in benchmarks/bench_*.py; do $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) results .pytest_cache
