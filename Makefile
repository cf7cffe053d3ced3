# lionops — make demo (set up + run the main job), make test (set up + all checks).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup demo test test-replay test-explore test-fast diagrams diagrams-check bench bench-peers clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(PY) -m lionops.demo

test: setup
	$(PY) -m pytest -q
	$(MAKE) --no-print-directory test-replay
	$(MAKE) --no-print-directory diagrams-check

# Replay every example committed in tests/.hypothesis-db (read-only, no generation).
test-replay: setup
	LIONOPS_HYPOTHESIS_PROFILE=replay $(PY) -m pytest -q -m hypothesis

# Random search; new failures are appended to tests/.hypothesis-db (commit them with the fix).
test-explore: setup
	LIONOPS_HYPOTHESIS_PROFILE=explore $(PY) -m pytest -q -m hypothesis

test-fast: setup
	$(PY) -m pytest -q -x

diagrams: setup
	$(PY) -m lionops diagram --out diagrams

diagrams-check: setup
	$(PY) -m lionops diagram --check diagrams

bench: setup
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) build dist *.egg-info .lionops out
