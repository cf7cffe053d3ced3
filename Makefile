# lionops — make demo (set up + run the main job), make test (set up + all checks).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup demo test test-fast diagrams diagrams-check bench bench-peers clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(PY) -m lionops.demo

test: setup
	$(PY) -m pytest -q
	$(MAKE) --no-print-directory diagrams-check

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
