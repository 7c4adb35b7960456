# Two commands: `make demo` and `make test`. Each builds .venv on first use.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# Arize Phoenix, the real OTLP receiver of the OpenTelemetry end-to-end test (tests/e2e/test_otel_phoenix.py),
# in a virtualenv of its own: its dependencies conflict with ours. Pinned; nothing downloads at run time.
PHOENIX_VENV  := .venv-phoenix
PHOENIX_STAMP := $(PHOENIX_VENV)/.installed
# Where torch's CPU build comes from. PyPI's Linux wheel of torch is the CUDA build (several GB of nvidia
# libraries): on a machine without a CPU wheel at hand (pip's find-links, as CI has), give PyTorch's CPU index:
#   make TORCH_INDEX=https://download.pytorch.org/whl/cpu demo
TORCH_INDEX ?=

.PHONY: demo test lint install clean

$(STAMP): pyproject.toml constraints.txt setup.py ingest/codec/_ndjson_arrow.c ingest/otel/_otlp_wire.c ingest/otel/_otlp_traces.c \
          ingest/otel/_otlp_wire.h
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch first, so the embedding model does not pull another build (TORCH_INDEX above: the CPU one). Every
	# version is the one the suite last passed with (constraints.txt, written by .ci/lock.py).
	$(PY) -m pip install --quiet -c constraints.txt $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) torch==2.13.0
	$(PY) -m pip install --quiet -c constraints.txt -e '.[probes,es,dev,bench]'
	@# The browser test drives Debian's Chromium, the deploy test runs promtool (Debian's prometheus),
	@# `python -m bench gateway` drives wrk and the shared-state tests start redis-server; install them
	@# when we may (root with apt-get).
	@missing=""; command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v promtool >/dev/null 2>&1 || missing="$$missing prometheus"; \
	command -v wrk >/dev/null 2>&1 || missing="$$missing wrk"; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else echo "note: not installed:$$missing; the tests that need them will be skipped"; fi; fi
	@touch $(STAMP)

$(PHOENIX_STAMP):
	@test -x $(PHOENIX_VENV)/bin/python || $(PYTHON) -m venv $(PHOENIX_VENV)
	@# Not fatal: without Phoenix only its end-to-end test is skipped (and the install is tried again next time).
	@$(PHOENIX_VENV)/bin/python -m pip install --quiet --upgrade pip && \
	  $(PHOENIX_VENV)/bin/python -m pip install --quiet 'arize-phoenix==20.26.1' && touch $(PHOENIX_STAMP) || \
	  echo "note: Arize Phoenix could not be installed; tests/e2e/test_otel_phoenix.py will be skipped"

install: $(STAMP) $(PHOENIX_STAMP)

demo: $(STAMP)
	$(VENV)/bin/routelens demo --config routelens.yaml

test: lint $(PHOENIX_STAMP)
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy schemas router_core ingest probes app sim bench
	$(VENV)/bin/deptry .

clean:
	rm -rf $(VENV) $(PHOENIX_VENV) .routelens .pytest_cache
