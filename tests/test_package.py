"""The package as a user imports it: `import menger` is cheap, and its public names are what `__all__` says."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import menger

ROOT = Path(__file__).resolve().parents[1]


def test_every_name_in_all_is_the_object_its_module_defines():
    import menger.api
    import menger.config
    import menger.experiment
    import menger.runtime

    expected = {
        "train": menger.api.train, "resume": menger.api.resume, "load_policy": menger.api.load_policy,
        "load_run_config": menger.api.load_run_config, "Policy": menger.api.Policy,
        "UntrustedRunError": menger.api.UntrustedRunError, "ScriptObjectError": menger.api.ScriptObjectError,
        "TrainResult": menger.runtime.TrainResult, "Observer": menger.runtime.Observer,
        "ExperimentConfig": menger.experiment.ExperimentConfig, "load_experiment": menger.experiment.load_experiment,
        "ConfigError": menger.config.ConfigError,
    }
    assert sorted(menger.__all__) == sorted([*expected, "__version__"])
    for name, obj in expected.items():
        assert getattr(menger, name) is obj, name
    assert set(menger.__all__) <= set(dir(menger))
    namespace: dict = {}
    exec("from menger import *", namespace)
    assert set(menger.__all__) <= set(namespace)


def test_an_unknown_name_lists_the_public_ones():
    with pytest.raises(AttributeError, match=r"module 'menger' has no attribute 'trian'; its public names: .*train"):
        menger.trian  # noqa: B018


def test_the_public_names_load_on_first_use_only():
    script = ("import sys, menger; before = 'torch' in sys.modules; menger.train; "
              "print(before, 'torch' in sys.modules, 'menger.api' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True", "True"]


def test_the_type_hints_ship_with_the_package():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    assert (ROOT / "menger" / "py.typed").is_file()
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "py.typed" in package_data["menger"]
