# Two commands after cloning: `make reproduce` and `make test` (see README.md).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install reproduce test test-fast lint clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)  ## create .venv (if missing) and install hgresearch with dev tools

reproduce: $(STAMP)  ## regenerate paper/tables and paper/figures from the raw results
	$(BIN)/hgresearch reproduce

test: $(STAMP)  ## the whole test suite (what CI runs)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check hgresearch tests

clean:
	rm -rf build .pytest_cache
