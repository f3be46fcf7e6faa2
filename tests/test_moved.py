"""Module paths of earlier versions import as the modules that moved, and say where they went."""
from __future__ import annotations

import json
import subprocess
import sys

MOVED = {"menger.evaluate": "menger.commands.evaluate", "menger.match": "menger.commands.match",
         "menger.export": "menger.commands.export", "menger.plot": "menger.commands.plot",
         "menger.tune": "menger.tuning.search", "menger.pbt": "menger.tuning.pbt",
         "menger.league_runner": "menger.launch.league", "menger.supervise": "menger.cli.supervise"}

CHECK = """
import importlib, json, sys, warnings
out = {}
for old, new in json.loads(sys.argv[1]).items():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    out[old] = [module is importlib.import_module(new),
                [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]]
print(json.dumps(out))
"""


def test_each_old_path_is_the_moved_module_and_warns_once():
    done = subprocess.run([sys.executable, "-c", CHECK, json.dumps(MOVED)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    for old, (same, warnings) in json.loads(done.stdout).items():
        assert same, f"{old} is not {MOVED[old]}"
        assert any(f"{old} has moved to {MOVED[old]}" in w for w in warnings), (old, warnings)


def test_a_name_of_an_old_module_resolves_to_the_new_definition():
    done = subprocess.run([sys.executable, "-W", "ignore::DeprecationWarning", "-c",
                           "from menger.match import play_match; from menger.commands.match import play_match as p; "
                           "from menger.pbt import train_population; print(play_match is p)"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr
