# Two commands are all a newcomer needs: `make run` and `make test`.
# Each creates its own virtual environment in .venv on first use; ttc is then .venv/bin/ttc
# (on PATH after `. .venv/bin/activate`).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# torch is pinned in the same install command: unpinned, pip pulls several GB of CUDA packages.
TORCH := torch==2.13.0

.PHONY: run test test-fast guard lint fmt clean redis-server FORCE

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# An editable install whose files are linked into build/ (editable_mode=strict): mypy and other
# type checkers find `ttc` (setuptools' default import hook hides it from them), and only `ttc` is
# importable, not the top-level folders. A file added or removed is linked by installing again:
# .files lists the package's files and changes only when that list does.
$(VENV)/.files: FORCE | $(BIN)/python
	@find ttc engine adapters retrieval -not -path '*/__pycache__*' | sort > $@.new
	@if cmp -s $@.new $@; then rm $@.new; else mv $@.new $@; fi

$(VENV)/.installed: pyproject.toml $(VENV)/.files | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev,embed,ray]' $(TORCH) --config-settings editable_mode=strict
	touch $@

FORCE:

run: $(VENV)/.installed
	$(BIN)/ttc run $(ARGS)
	@echo "ttc is in $(BIN): run $(BIN)/ttc, or put it on PATH with: . $(BIN)/activate"

lint: $(VENV)/.installed
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy

# Every test, on two workers (pytest-xdist; tests/conftest.py keeps some modules on one worker),
# then (for the whole suite) the CPU guard.
test: lint redis-server
	$(BIN)/pytest -q -n 2 --dist loadgroup $(ARGS)
	$(if $(ARGS),,$(MAKE) --no-print-directory guard)

# A regression guard on the hot path's CPU, not a timing test: `ttc batch` may cost at most 2.5
# times the CPU per request of a bare aiohttp loop measured in the same run (about 1.4 times
# when this was written), against a minimal server in another process.
guard: $(VENV)/.installed
	$(BIN)/python benchmarks/client_overhead.py --count 5000 --clients bare,batch --guard 2.5

# The tests not marked slow (no end-to-end run, no pass over a whole data set).
test-fast: lint redis-server
	$(BIN)/pytest -q -n 2 --dist loadgroup -m "not slow" $(ARGS)

# --shared-limits' tests start a redis-server of their own: Debian's (PyPI's `redis-server` has no
# build for this Python). Installed once, when missing, by root; without it those tests skip
# (and fail in CI, where CI is set).
redis-server:
	@command -v redis-server >/dev/null || [ "$$(id -u)" != 0 ] || \
		(apt-get update -q && apt-get install -y -q --no-install-recommends redis-server)
	@command -v redis-server >/dev/null || \
		echo "note: no redis-server (install Debian's as root): --shared-limits' tests skip"

fmt: $(VENV)/.installed
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) build *.egg-info
