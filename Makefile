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

# Benchmarks (bench/README.md). The profiler and the peers are not lionops
# dependencies: pyinstrument goes into .venv, each peer into its own venv.
BENCH_STAMP := $(VENV)/.bench-installed
PEERS_DIR := .cache/bench-peers
PEER_lionagi := lionagi==0.36.0
PEER_pydantic-ai := pydantic-ai-slim==2.68.0

$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install -q --disable-pip-version-check pyinstrument
	touch $@

bench: setup $(BENCH_STAMP)
	$(PY) bench/run.py
	$(PY) bench/profile.py > /dev/null
	@echo "profiles: out/bench/profile-S1.txt out/bench/profile-S2.txt"

# A failed peer install does not stop the run: the table reports it.
$(PEERS_DIR)/%/.installed:
	@mkdir -p $(PEERS_DIR)
	@echo "installing $(PEER_$*) into $(PEERS_DIR)/$*"
	-@rm -rf $(PEERS_DIR)/$* && $(PYTHON) -m venv $(PEERS_DIR)/$* \
	  && $(PEERS_DIR)/$*/bin/pip install -q --disable-pip-version-check '$(PEER_$*)' > $(PEERS_DIR)/$*.log 2>&1 \
	  && touch $@ || echo "install of $(PEER_$*) failed: see $(PEERS_DIR)/$*.log"

bench-peers: setup $(BENCH_STAMP) $(PEERS_DIR)/lionagi/.installed $(PEERS_DIR)/pydantic-ai/.installed
	$(PY) bench/run.py --peers

clean:
	rm -rf $(VENV) build dist *.egg-info .lionops out
