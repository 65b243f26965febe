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

.PHONY: demo test test-slow lint proto bench clean

$(RUNTIME): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(PIP) install --quiet -e .
	touch $(RUNTIME)

$(STAMP): $(RUNTIME)
	$(PIP) install --quiet -e ".[dev]"
	touch $(STAMP)

## demo: LaLonde 2x2 DC-QE table (paper 003, Table 3 layout) and report.html into results/
demo: $(RUNTIME)
	$(BIN)/collabcausal simulate --dataset lalonde --bootstrap 200 --seed 0 --out results

## test: the fast suite (slow reproductions excluded), plus lint
test: $(STAMP)
	$(BIN)/ruff check collabcausal tests benchmarks scripts
	$(BIN)/python -m pytest -q

## test-slow: the full reproductions (paper-sized bootstrap, sweeps)
test-slow: $(STAMP)
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
