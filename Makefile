# The two commands of the README: `make train` and `make test`.
# Both create .venv, install torch (the CPU wheel unless a torch is already importable) and the package:
# `make train` the core and the `plot` extra (its plot.png), `make test` every extra the tests exercise.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_SPEC ?= torch==2.13.0
PRESET ?= cartpole-ppo

.PHONY: setup setup-test train test typecheck docs wheel-check bench clean

setup: $(VENV)/.installed
setup-test: $(VENV)/.installed-test

$(VENV)/.installed: pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[plot]"
	touch $@

# The tests also exercise the Ray launcher on a simulated cluster: the `ray` extra is installed for them.
$(VENV)/.installed-test: $(VENV)/.installed
	$(PY) -m pip install -q -e ".[dev,ray]"
	touch $@

# The documentation site (mkdocs.yml, docs/): built offline, every warning an error, into site/.
$(VENV)/.installed-docs: $(VENV)/.installed
	$(PY) -m pip install -q -e ".[docs]"
	touch $@

train: setup
	$(VENV)/bin/menger train $(PRESET)

test: setup-test
	$(PY) -X faulthandler -m pytest -q --durations=25

# The public API (menger/__init__.py, menger/api.py) and examples/custom_objects.py, as [tool.mypy] in
# pyproject.toml says.
typecheck: setup-test  # mypy comes with the dev extra
	$(PY) -m mypy

docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# The release as a user installs it: the wheel built, installed into a fresh venv without extras (TORCH_SPEC
# first), cartpole-ppo trained to 475 from outside the checkout, then pong-impala with the atari extra.
$(VENV)/.installed-build: $(VENV)/.installed
	$(PY) -m pip install -q "build>=1"
	touch $@

wheel-check: $(VENV)/.installed-build
	PYTHON=$(PY) TORCH_SPEC="$(TORCH_SPEC)" .ci/wheel_check.sh

# CartPole and Pong: the atari extra
bench: setup
	$(PY) -m pip install -q -e ".[atari]"
	$(PY) benchmarks/throughput.py

clean:
	rm -rf $(VENV) runs build dist site *.egg-info
