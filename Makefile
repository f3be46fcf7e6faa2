# The two commands of the README: `make train` and `make test`.
# Both create .venv, install torch (the CPU wheel unless a torch is already importable) and the package.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_SPEC ?= torch==2.13.0
PRESET ?= cartpole-ppo

.PHONY: setup setup-test train test typecheck docs bench clean

setup: $(VENV)/.installed
setup-test: $(VENV)/.installed-test

$(VENV)/.installed: pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[dev]"
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
	$(PY) -m pytest -q

# The public API (menger/__init__.py, menger/api.py) and examples/custom_objects.py, as [tool.mypy] in
# pyproject.toml says.
typecheck: setup
	$(PY) -m mypy

docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

bench: setup
	$(PY) benchmarks/throughput.py

clean:
	rm -rf $(VENV) runs build site *.egg-info
