"""Optional packages and the platform (menger.extras): the core install trains without any extra, and a command
that needs a missing one ends in one message naming the extra that installs it.

A package is made missing by `sys.modules[name] = None` (then `import name` raises ModuleNotFoundError), which
the test process restores afterwards; the checks that need a fresh interpreter run one in a subprocess.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from menger.cli import main
from menger import api
from menger.extras import EXTRAS, MissingExtraError, UnsupportedPlatformError, missing_extra, require, require_linux

ROOT = Path(__file__).resolve().parents[1]
# the distribution that installs each module of EXTRAS (its name in pyproject.toml)
DISTRIBUTION = {"ale_py": "ale-py", "pygame": "pygame", "matplotlib": "matplotlib", "imageio": "imageio",
                "imageio_ffmpeg": "imageio-ffmpeg", "optuna": "optuna", "ray": "ray", "onnx": "onnx",
                "onnxruntime": "onnxruntime", "wandb": "wandb", "Box2D": "box2d", "mujoco": "mujoco",
                "minatar": "minatar", "pyspiel": "open_spiel"}
OPTIONAL_MODULES = sorted({module for modules in EXTRAS.values() for module in modules})
TINY_TRAIN = ["--set", "stop.env_frames=1", "--set", "stop.target_return=null", "--set", "checkpoint.interval_s=0",
              "--no-progress"]


def _pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib", reason="Python 3.11+ reads pyproject.toml")
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _names(requirements) -> set[str]:
    """The distribution names of requirement strings ("ray[default]>=2.52,<3" -> "ray")."""
    from packaging.requirements import Requirement

    return {Requirement(text).name.lower() for text in requirements}


def _missing(monkeypatch, *names: str) -> None:
    """`import name` fails as if the package were not installed, for each name and its submodules."""
    _forget(monkeypatch, *names)
    for name in names:
        monkeypatch.setitem(sys.modules, name, None)


def _forget(monkeypatch, *prefixes: str) -> None:
    """The modules under each prefix are imported anew (and fail anew) by this test."""
    for loaded in [m for m in sys.modules if any(m == p or m.startswith(f"{p}.") for p in prefixes)]:
        monkeypatch.delitem(sys.modules, loaded)


# ----- the helper --------------------------------------------------------------------------------------------------
def test_require_gives_the_module_when_it_is_installed():
    assert require("json", "plot", "a test") is json


def test_a_missing_module_names_its_extra_what_needs_it_and_what_to_do_instead(monkeypatch):
    _missing(monkeypatch, "matplotlib")
    with pytest.raises(MissingExtraError) as caught:
        require("matplotlib.figure", "plot", "`menger plot`", instead="read metrics.jsonl")
    message = str(caught.value)
    assert message.startswith("`menger plot` needs matplotlib, which is not installed")
    assert 'pip install "menger-rl[plot]"' in message and message.endswith("; or read metrics.jsonl")
    assert isinstance(caught.value, ImportError) and caught.value.name == "matplotlib"


def test_an_installed_package_that_fails_to_import_is_not_called_missing(tmp_path, monkeypatch):
    """Its own missing dependency is a broken install: the original error, not "install the extra"."""
    (tmp_path / "half_installed.py").write_text("import a_dependency_nobody_installed\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as caught:
        require("half_installed", "plot", "a test")
    assert not isinstance(caught.value, MissingExtraError) and caught.value.name == "a_dependency_nobody_installed"


def test_a_library_module_that_needs_an_extra_is_reported_as_that_extra():
    error = missing_extra(ModuleNotFoundError("No module named 'pygame'", name="pygame"), "the env 'x:env'")
    assert isinstance(error, MissingExtraError) and "menger-rl[games]" in str(error)
    assert missing_extra(ModuleNotFoundError("No module named 'mypkg'", name="mypkg"), "the env 'mypkg:E'") is None


# ----- the extras are the ones pyproject.toml declares ---------------------------------------------------------------
def test_every_extra_of_the_code_is_declared_with_its_packages():
    declared = _pyproject()["project"]["optional-dependencies"]
    for extra, modules in EXTRAS.items():
        assert extra in declared, f"pyproject.toml has no extra {extra!r}"
        assert {DISTRIBUTION[m].lower() for m in modules} <= _names(declared[extra]), extra


def test_the_core_install_holds_no_optional_package_and_all_holds_every_extra():
    from packaging.requirements import Requirement

    project = _pyproject()["project"]
    optional = {DISTRIBUTION[m].lower() for m in OPTIONAL_MODULES}
    assert not optional & _names(project["dependencies"])
    declared = project["optional-dependencies"]
    runtime_extras = set(declared) - {"docs", "dev", "all"}
    assert set(EXTRAS) <= runtime_extras
    (all_extras,) = map(Requirement, declared["all"])
    assert all_extras.name == "menger-rl" and all_extras.extras == runtime_extras


def test_the_version_is_written_once():
    import menger

    pyproject = _pyproject()
    assert pyproject["project"]["dynamic"] == ["version"] and "version" not in pyproject["project"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "menger.__version__"}
    assert f"## [{menger.__version__}]" in (ROOT / "CHANGELOG.md").read_text()


# ----- each command names the extra it needs -------------------------------------------------------------------------
def _run(argv, capsys) -> tuple[int, str]:
    code = main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


def test_menger_plot_without_matplotlib(tmp_path, capsys, monkeypatch):
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 1, "time/wall_s": 1.0}) + "\n")
    _missing(monkeypatch, "matplotlib")
    code, err = _run(["plot", str(tmp_path)], capsys)
    assert code == 1 and "needs matplotlib" in err and 'pip install "menger-rl[plot]"' in err
    assert not (tmp_path / "plot.png").exists()


def test_a_comparison_of_runs_without_matplotlib(monkeypatch):
    from menger.commands.compare import draw_comparison

    _missing(monkeypatch, "matplotlib")
    with pytest.raises(MissingExtraError, match=r"needs matplotlib.*menger-rl\[plot\]"):
        draw_comparison({"seeds": [np.array([[0.0, 1.0], [100.0, 2.0]])]}, "episode/return_mean")


def test_menger_place_without_matplotlib_says_so_before_it_places(tmp_path, capsys, monkeypatch):
    _missing(monkeypatch, "matplotlib")
    code, err = _run(["place", "macro_tiles_10x10", "--method", "random", "--out", str(tmp_path / "out")], capsys)
    assert code == 1 and "`menger place`" in err and 'pip install "menger-rl[plot]"' in err
    assert not (tmp_path / "out").exists()


def test_menger_tune_optuna_without_optuna(tmp_path, capsys, monkeypatch):
    _missing(monkeypatch, "optuna")
    code, err = _run(["tune", "cartpole-ppo", "--search", "optuna", "--trials", "1", "--out", str(tmp_path / "t")],
                     capsys)
    assert code == 1 and "`menger tune --search optuna` needs optuna" in err and "menger-rl[tune]" in err


def test_an_atari_preset_without_ale_py_stops_before_the_run_directory(tmp_path, capsys, monkeypatch):
    _missing(monkeypatch, "ale_py")
    code, err = _run(["train", "pong-impala", "--run-dir", str(tmp_path / "run")], capsys)
    assert code == 1 and "needs ale_py" in err and 'pip install "menger-rl[atari]"' in err
    assert len(err.strip().splitlines()) <= 3, err  # one message, no generic import hint under it
    assert not (tmp_path / "run").exists()


def test_connect_four_without_pygame_names_the_games_extra(tmp_path, capsys, monkeypatch):
    _missing(monkeypatch, "pygame")
    _forget(monkeypatch, "pettingzoo.classic")  # PettingZoo's Connect Four imports pygame when it is imported
    code, err = _run(["train", "connect4-selfplay", "--run-dir", str(tmp_path / "run")], capsys)
    assert code == 1 and "needs pygame" in err and 'pip install "menger-rl[games]"' in err
    assert not (tmp_path / "run").exists()


def test_a_video_without_imageio_or_pygame_names_the_video_extra(tmp_path, monkeypatch):
    from menger.envs.render import make_render_env
    from menger.logging.video import VideoWriter

    _missing(monkeypatch, "imageio", "imageio_ffmpeg")
    with pytest.raises(MissingExtraError, match=r"needs imageio.*menger-rl\[video\]"):
        VideoWriter(tmp_path / "v.mp4", fps=30).append(np.zeros((4, 4, 3), np.uint8))
    _missing(monkeypatch, "pygame")  # gymnasium's CartPole draws itself with pygame
    with pytest.raises(MissingExtraError, match=r"'CartPole-v1'.*needs pygame.*menger-rl\[video\]"):
        make_render_env("CartPole-v1", seed=0)


# ----- the platform ---------------------------------------------------------------------------------------------------
def test_training_off_linux_is_refused_with_the_reasons(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.delenv("MENGER_ALLOW_UNSUPPORTED_PLATFORM", raising=False)
    code, err = _run(["train", "cartpole-ppo", "--run-dir", str(tmp_path / "run")], capsys)
    assert code == 1 and "menger train runs on Linux" in err and "fork" in err and "/dev/shm" in err
    assert not (tmp_path / "run").exists()
    assert main(["presets"]) == 0  # what only reads files works anywhere
    monkeypatch.setenv("MENGER_ALLOW_UNSUPPORTED_PLATFORM", "1")
    require_linux("menger train")  # the user's choice to try anyway
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.delenv("MENGER_ALLOW_UNSUPPORTED_PLATFORM")
    with pytest.raises(UnsupportedPlatformError, match="WSL 2"):
        require_linux("menger resume")
    with pytest.raises(UnsupportedPlatformError, match="menger.train runs on Linux"):  # the Python API too
        api.train("cartpole-ppo", run_dir=str(tmp_path / "api-run"))
    assert not (tmp_path / "api-run").exists()


# Ray's own modules import it at their top: only the ray launcher and `tune --on ray` import them, after `require`
RAY_MODULES = {"menger/params/ray.py", "menger/params/caches.py", "menger/transport/ray.py", "menger/inference/ray.py",
               "menger/launch/ray.py", "menger/launch/emulated_ray.py"}


def test_no_module_imports_an_optional_package_when_it_is_imported():
    """Optional packages are imported inside the function that needs them (after `require`), never at a module's
    top, where importing the module would fail without the extra (`if TYPE_CHECKING:` imports do not run)."""
    import ast

    found = []
    for path in sorted((ROOT / "menger").rglob("*.py")):
        name = str(path.relative_to(ROOT))
        tree = ast.parse(path.read_text(), name)
        for node in tree.body:  # module level only
            imported = ([alias.name for alias in node.names] if isinstance(node, ast.Import) else
                        [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
            for module in imported:
                top = module.split(".")[0]
                if top in OPTIONAL_MODULES and not (top == "ray" and name in RAY_MODULES):
                    found.append(f"{name}:{node.lineno} imports {module}")
    assert not found, found


# ----- a fresh interpreter: the core install's path never imports an extra ------------------------------------------
def _python(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)


def test_importing_the_cli_and_the_api_imports_no_optional_package(tmp_path):
    done = _python(f"""
        import sys
        import menger, menger.api, menger.cli
        from menger.experiment import load_experiment
        load_experiment("cartpole-ppo")
        print(sorted(name for name in sys.modules if name.split(".")[0] in {OPTIONAL_MODULES!r}))
    """, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_cartpole_trains_with_every_optional_package_missing(tmp_path):
    """What `pip install menger-rl` alone has: the run trains, checkpoints, and only its plot says what is missing."""
    done = _python(f"""
        import sys
        for name in {OPTIONAL_MODULES!r}:
            sys.modules[name] = None  # as if not installed, in this process and the actors it forks
        from menger.cli import main
        sys.exit(main(["train", "cartpole-ppo", "--run-dir", "run", *{TINY_TRAIN!r}]))
    """, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "run" / "metrics.jsonl").is_file() and any((tmp_path / "run" / "checkpoints").iterdir())
    assert not (tmp_path / "run" / "plot.png").exists()
    assert "needs matplotlib" in done.stdout and 'pip install "menger-rl[plot]"' in done.stdout
