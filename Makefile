# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: venv test lint demo lab bench conformance clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,dist,inspect]'
	touch $(STAMP)

venv: $(STAMP)

test: $(STAMP) lint
	$(BIN)/python -m pytest -q -p no:cacheprovider tests
	$(BIN)/python -m pytest -q -p no:cacheprovider --nbmake notebooks

# ruff over the package, tests and benchmarks; mypy over the two bottom layers (core, compaction)
lint: $(STAMP)
	$(BIN)/ruff check h9eval tests benchmarks
	$(BIN)/mypy

demo: $(STAMP)
	$(BIN)/h9eval demo

# JupyterLab on 127.0.0.1 with this project's environment registered as the kernel "Python (h9eval)".
# Containers and cloud notebooks often run as root, which Jupyter refuses without --allow-root.
LAB_PORT ?= 8888
LAB_ARGS ?=
LAB_UID ?= $(shell id -u)
lab: $(STAMP)
	test -f $(VENV)/share/jupyter/kernels/h9eval/kernel.json || \
		$(BIN)/python -m ipykernel install --sys-prefix --name h9eval --display-name "Python (h9eval)" >/dev/null
	$(BIN)/jupyter lab --ip=127.0.0.1 --port=$(LAB_PORT) --no-browser \
		--ServerApp.root_dir=$(CURDIR) --MappingKernelManager.default_kernel_name=h9eval \
		$(if $(filter 0,$(LAB_UID)),--allow-root) $(LAB_ARGS) notebooks/

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

conformance: $(STAMP)
	$(BIN)/h9eval conformance

clean:
	rm -rf $(VENV) results/demo .pytest_cache
