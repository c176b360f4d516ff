# Two entry points, each creating or reusing .venv and installing what it needs:
#   make quickstart   train the zoo, run the quickstart sweep on Fashion-MNIST, write its report
#   make test         run the test suite
# and a developer's loop while editing:
#   make test-fast    the tests not marked slow (no donor training, Ray or browser), in a few minutes
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
FASHION_DIR := /usr/share/datasets/fashion-mnist
STORAGE ?= results
REPORT ?= report

.PHONY: quickstart test test-fast install lock fashion-mnist browser slurm clean

install: $(STAMP)

# Reproducible installs: every package comes from requirements.lock (exact versions and sha256 hashes, for
# Python 3.11 on x86_64), so a green run today is green tomorrow. pyproject.toml keeps the compatible ranges
# for people who install the package into an environment of their own. torch==2.14.1 / torchvision==0.29.1
# install from local files on the project's machines (pip's configuration points at them).
$(STAMP): pyproject.toml requirements.lock
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --require-hashes --no-deps -r requirements.lock
	$(PY) -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

# Re-resolve the lock from pyproject.toml's ranges held to constraints.txt's exact versions (pip's own resolver,
# honouring this machine's pip configuration), then reinstall from it. Commit requirements.lock afterwards.
lock:
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) tests/scripts/lock.py
	$(MAKE) install

# The full 70,000 Fashion-MNIST images from Debian's package; elsewhere the loader downloads them once.
fashion-mnist:
	@if [ -f $(FASHION_DIR)/train-images-idx3-ubyte.gz ]; then :; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		(apt-get install -y -q dataset-fashion-mnist >/dev/null 2>&1 || \
		 (apt-get update -q >/dev/null && apt-get install -y -q dataset-fashion-mnist >/dev/null)) \
		|| echo "note: could not install dataset-fashion-mnist; the loader will try torchvision's download"; \
	else echo "note: no $(FASHION_DIR); the loader will try torchvision's download"; fi

# Debian's Chromium and its driver, for the report's browser test (tests/project/test_browser.py skips without them).
browser:
	@if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		(apt-get install -y -q chromium chromium-driver >/dev/null 2>&1 || \
		 (apt-get update -q >/dev/null && apt-get install -y -q chromium chromium-driver >/dev/null)) \
		|| echo "note: could not install chromium; the browser test will be skipped"; \
	else echo "note: no chromium; the browser test will be skipped"; fi

# Debian's SLURM and munge, for the one-host SLURM test (tests/project/test_slurm.py skips without them; it needs root).
slurm:
	@if command -v slurmctld >/dev/null 2>&1 && command -v slurmd >/dev/null 2>&1 && command -v munged >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		(apt-get install -y -q slurm-wlm munge >/dev/null 2>&1 || \
		 (apt-get update -q >/dev/null && apt-get install -y -q slurm-wlm munge >/dev/null)) \
		|| echo "note: could not install slurm-wlm and munge; the SLURM test will be skipped"; \
	else echo "note: no slurmctld/slurmd/munged; the SLURM test will be skipped"; fi

quickstart: $(STAMP) fashion-mnist
	$(VENV)/bin/stitchsweep run search_spaces/quickstart.yaml --storage $(STORAGE)
	$(VENV)/bin/stitchsweep report $(STORAGE)/quickstart --out $(REPORT)

test: $(STAMP) fashion-mnist browser slurm
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m pytest

# What `make test` runs less the tests marked slow (pyproject.toml's markers); CI runs `make test`.
test-fast: $(STAMP) fashion-mnist
	$(PY) -m pytest -m "not slow"

clean:
	rm -rf $(STORAGE) $(REPORT) .pytest_cache
