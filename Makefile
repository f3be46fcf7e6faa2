# The two commands of the README: `make train` and `make test`.
# Both create .venv, install torch (the CPU wheel unless a torch is already importable) and the package.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_SPEC ?= torch==2.13.0
PRESET ?= cartpole-ppo

.PHONY: setup train test bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[dev]"
	touch $@

train: setup
	$(VENV)/bin/menger train $(PRESET)

test: setup
	$(PY) -m pytest -q

bench: setup
	$(PY) benchmarks/throughput.py

clean:
	rm -rf $(VENV) runs build *.egg-info
