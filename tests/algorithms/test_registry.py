"""The algorithm registry: no algorithm's name is compared outside it, every built-in entry is whole, every preset
is listed by the algorithm it trains, and a package adds an algorithm through the entry point."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from menger import algorithms
from menger.config import ConfigError
from menger.experiment import ExperimentConfig, list_presets, load_experiment

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "menger"
PLUGIN = Path(__file__).resolve().parent / "plugin"


def _names_in(node: ast.AST, names: set[str]) -> list[str]:
    """The algorithm names a constant (or a literal tuple, list or set of constants) holds."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [name for item in node.elts for name in _names_in(item, names)]
    return []


def _reads_algo(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "algo"


def algorithm_switches(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, what) of every place that decides by an algorithm's name: a comparison with a name or with an
    `.algo` value, a mapping keyed by names, `getattr(x, y.algo)` and `table[y.algo]`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_reads_algo(side) for side in sides):
                found.append((node.lineno, "compares .algo"))
            elif any(_names_in(side, names) for side in sides):
                found.append((node.lineno, f"compares with {sorted({n for s in sides for n in _names_in(s, names)})}"))
        elif isinstance(node, ast.Dict) and any(key is not None and _names_in(key, names) for key in node.keys):
            found.append((node.lineno, "a mapping keyed by algorithm names"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
                and len(node.args) > 1 and _reads_algo(node.args[1]):
            found.append((node.lineno, "getattr(..., .algo)"))
        elif isinstance(node, ast.Subscript) and _reads_algo(node.slice):
            found.append((node.lineno, "a table indexed by .algo"))
    return found


def test_the_checker_finds_every_kind_of_switch():
    source = textwrap.dedent("""
        if config.algo == "ppo": pass
        if name in ("apex", "r2d2"): pass
        table = {"sac": 1}
        section = getattr(config, config.algo)
        learner = LEARNERS[config.algo]
        fine = {"policy": "ppo"}          # a value, not a key: what a message names
        also_fine = build(config.algo)    # handing the name to the registry
    """)
    kinds = [what for _, what in algorithm_switches(source, {"ppo", "apex", "r2d2", "sac"})]
    assert kinds == ["compares .algo", "compares with ['apex', 'r2d2']", "a mapping keyed by algorithm names",
                     "getattr(..., .algo)", "a table indexed by .algo"]


def test_no_algorithm_name_is_compared_outside_the_registry():
    names = set(algorithms.names())
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(ROOT)
        if relative.parts[:2] == ("menger", "algorithms") or relative == Path("menger/registry.py"):
            continue  # the registry's table, and each algorithm's folder speaking of itself
        for line, what in algorithm_switches(path.read_text(), names):
            problems.append(f"{relative}:{line}: {what}")
    assert not problems, ("ask the registry (menger.algorithms.get(config.algo) and its properties) instead:\n"
                          + "\n".join(problems))


def test_reading_an_experiment_loads_no_torch():
    """Every spec is read whenever an experiment is (`menger config`, `menger presets`, a config check): specs name
    their networks, which load torch only when a run builds one."""
    script = ("import sys; from menger.experiment import list_presets, load_experiment; "
              "[load_experiment(name) for name in list_presets()]; print(sorted({'torch', 'ray'} & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"reading every preset loaded {done.stdout.strip()}"


def test_every_built_in_algorithm_is_registered_whole():
    for name in algorithms.BUILT_IN:
        algorithm = algorithms.get(name)
        assert algorithm.name == name
        assert algorithm.module.startswith(f"menger.algorithms.{name}.")
        assert algorithm.settings in algorithm.sections
        __import__(algorithm.builder)  # its builder is where the registry says


def test_each_algorithm_has_its_section_in_the_experiment():
    config = ExperimentConfig()
    for algorithm in algorithms.all_algorithms():
        for section, cls in algorithm.sections.items():
            assert isinstance(getattr(config, section), cls)


def test_every_preset_is_listed_by_the_algorithm_it_trains():
    listed = {preset: a.name for a in algorithms.all_algorithms() for preset in a.presets}
    for preset in list_presets():
        algo = load_experiment(preset).algo
        assert listed.get(preset) == algo, f"preset {preset} trains {algo}: list it in that algorithm's presets"
    assert set(listed) <= set(list_presets()), "an algorithm lists a preset that does not exist"


def test_an_unknown_algorithm_names_the_closest_and_the_entry_point():
    with pytest.raises(ConfigError, match=r"'apx'.*did you mean 'apex'"):
        load_experiment({"algo": "apx"})
    with pytest.raises(ConfigError, match="menger.algorithms"):
        algorithms.get("no-such-algorithm")


def test_a_section_shared_by_two_algorithms_must_be_one_class():
    assert algorithms.get("impala").sections["vtrace"] is algorithms.get("appo").sections["vtrace"]


def test_an_algorithm_entry_refuses_what_it_cannot_be():
    with pytest.raises(TypeError, match="settings"):
        algorithms.Algorithm(name="x", summary="", sections={}, settings="x", network=lambda *a: None)
    with pytest.raises(TypeError, match="actions"):
        algorithms.Algorithm(name="x", summary="", sections={"x": object}, settings="x", network=lambda *a: None,
                             actions="continuous")


def test_old_import_paths_of_the_sections_warn_and_still_work():
    import menger.experiment as experiment
    from menger.algorithms.ppo.spec import PPOConfig

    with pytest.warns(DeprecationWarning, match="menger.algorithms.ppo.spec"):
        assert experiment.PPOConfig is PPOConfig


def _plugin_env(tmp_path: Path) -> dict:
    """A site directory where the test plug-in is installed as pip would: its package and a dist-info with the
    entry point."""
    site = tmp_path / "site"
    dist = site / "menger_test_algorithm-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: menger-test-algorithm\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[menger.algorithms]\nvpg = menger_test_algorithm.spec:ALGORITHM\n")
    os.symlink(PLUGIN / "menger_test_algorithm", site / "menger_test_algorithm")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


@pytest.mark.slow
def test_a_plug_in_registers_through_the_entry_point_and_trains(tmp_path):
    """A package outside Menger adds `vpg` (REINFORCE with a learned baseline): its section, its presets folder,
    its learner; `menger train` runs it on the real runtime, and its learner's statistics are in the metrics."""
    env = _plugin_env(tmp_path)
    run = tmp_path / "run"
    command = [sys.executable, "-c", "import sys; from menger.cli import main; sys.exit(main())", "train",
               "cartpole-vpg", "--run-dir", str(run), "--set", "log.interval_s=0.2", "--set", "log.progress=false"]
    done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    last = records[-1]
    assert last["learner/updates"] >= 50
    assert "learner/vpg_loss" in last  # its own learner stepped
    returns = [r["episode/return_mean"] for r in records if r.get("episode/return_mean")]
    assert max(returns) > max(3 * returns[0], 150)  # and it learns (a random policy's episodes last about 22 steps)
    listing = subprocess.run([sys.executable, "-c", "from menger.experiment import ExperimentConfig, list_presets;"
                              "print(sorted(list_presets())); print(ExperimentConfig().vpg)"],
                             env=env, capture_output=True, text=True, timeout=120)
    assert "cartpole-vpg" in listing.stdout and "VPGConfig(" in listing.stdout, listing.stderr
