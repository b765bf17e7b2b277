# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: venv kernel test lint demo lab bench conformance clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,dist,inspect,openai]'
	touch $(STAMP)

# The notebooks declare the kernel "h9eval" (this project's .venv): nbmake starts the kernel a
# notebook names, so `make test` registers it first, as `make lab` does.
KERNEL := $(VENV)/share/jupyter/kernels/h9eval/kernel.json
$(KERNEL): $(STAMP)
	$(BIN)/python -m ipykernel install --sys-prefix --name h9eval --display-name "Python (h9eval)" >/dev/null

kernel: $(KERNEL)

venv: $(STAMP) $(KERNEL)

test: $(STAMP) $(KERNEL) lint
	$(BIN)/python -m pytest -q -p no:cacheprovider tests
	$(BIN)/python -m pytest -q -p no:cacheprovider --nbmake notebooks

# ruff (lint, and format at 120 columns) over the code; mypy over core, compaction, results, runs, sweeps and analysis
lint: $(STAMP)
	$(BIN)/ruff check h9eval tests benchmarks examples scripts
	$(BIN)/ruff format --check h9eval tests benchmarks examples scripts
	$(BIN)/mypy

demo: $(STAMP)
	$(BIN)/h9eval demo

# JupyterLab on 127.0.0.1 with this project's environment registered as the kernel "Python (h9eval)".
# The file browser's root is the project (so results/ is reachable); it opens on notebooks/.
# Containers and cloud notebooks often run as root, which Jupyter refuses without --allow-root.
LAB_PORT ?= 8888
LAB_ARGS ?=
LAB_UID ?= $(shell id -u)
lab: $(STAMP) $(KERNEL)
	$(BIN)/jupyter lab --ip=127.0.0.1 --port=$(LAB_PORT) --no-browser \
		--ServerApp.root_dir=$(CURDIR) --FileContentsManager.preferred_dir=notebooks \
		--MappingKernelManager.default_kernel_name=h9eval \
		$(if $(filter 0,$(LAB_UID)),--allow-root) $(LAB_ARGS)

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

conformance: $(STAMP)
	$(BIN)/h9eval conformance

clean:
	rm -rf $(VENV) results/demo .pytest_cache
