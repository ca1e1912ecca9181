# Two commands are all a newcomer needs: `make run` and `make test`.
# Each creates its own virtual environment in .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# torch is pinned in the same install command: unpinned, pip pulls several GB of CUDA packages.
TORCH := torch==2.13.0

.PHONY: run test lint fmt clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev,embed]' $(TORCH)
	touch $@

run: $(VENV)/.installed
	$(BIN)/ttc run $(ARGS)

lint: $(VENV)/.installed
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy

test: lint
	$(BIN)/pytest -q $(ARGS)

fmt: $(VENV)/.installed
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) build *.egg-info
