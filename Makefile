# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: venv test lint demo bench conformance clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,dist]'
	touch $(STAMP)

venv: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider tests
	$(BIN)/python -m pytest -q -p no:cacheprovider --nbmake notebooks

# ruff over the package, tests and benchmarks; mypy over the two bottom layers (core, compaction)
lint: $(STAMP)
	$(BIN)/ruff check h9eval tests benchmarks
	$(BIN)/mypy

demo: $(STAMP)
	$(BIN)/h9eval demo

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

conformance: $(STAMP)
	$(BIN)/h9eval conformance

clean:
	rm -rf $(VENV) results/demo .pytest_cache
