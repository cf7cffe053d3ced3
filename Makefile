# lionops — make demo (set up + run the main job), make test (set up + all checks).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup demo test test-fast diagrams diagrams-check graphviz mermaid-parser bench bench-peers clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(PY) -m lionops.demo

test: setup mermaid-parser
	$(PY) -m pytest -q
	$(MAKE) --no-print-directory diagrams-check

test-fast: setup
	$(PY) -m pytest -q -x

# diagrams/ is generated from states/ (never hand-edited). The SVG needs Graphviz
# `dot`: installed from Debian when missing and run as root, otherwise skipped.
diagrams: setup
	@command -v dot >/dev/null 2>&1 || $(MAKE) --no-print-directory graphviz
	$(PY) -m lionops diagram --out diagrams

# Fails when diagrams/ is stale against states/ (the SVG is not compared).
diagrams-check: setup
	$(PY) -m lionops diagram --check diagrams

graphviz:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  (apt-get install -y -qq graphviz >/dev/null 2>&1 || \
	   (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq graphviz >/dev/null 2>&1)) && echo "installed graphviz" || \
	  echo "could not install graphviz: the SVG will be skipped"; \
	else echo "graphviz missing and not root: the SVG will be skipped"; fi

# Mermaid's own parser (pinned in tests/mermaid/) under Node, for the diagram tests;
# never fails: without node or the npm registry those tests skip and say why.
mermaid-parser: setup
	@$(PY) tests/mermaid/install.py || true

bench: setup
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) build dist *.egg-info .lionops out
