"""menger schedule-gpus on generated trace files: the table, the files it writes, and errors that name the fix."""

import csv
import json
import re

import numpy as np
import pytest

from menger.apps.gpucluster.commands import schedule_gpus_main
from menger.apps.gpucluster.synthetic import synthetic_nodes, synthetic_tasks
from menger.apps.gpucluster.trace import write_nodes, write_tasks


@pytest.fixture
def generated(tmp_path):
    rng = np.random.default_rng(0)
    write_nodes(tmp_path / "nodes.csv", synthetic_nodes(30, rng))
    write_tasks(tmp_path / "tasks.csv", synthetic_tasks(800, rng))
    return str(tmp_path / "nodes.csv"), str(tmp_path / "tasks.csv")


def test_it_compares_heuristics_over_seeds_and_writes_the_curves(generated, tmp_path, capsys):
    nodes, tasks = generated
    out = tmp_path / "out"
    code = schedule_gpus_main(["--nodes", nodes, "--trace", tasks, "--policy", "fgd", "--policy", "random",
                               "--seeds", "3", "--out", str(out), "--no-plot"])
    printed = capsys.readouterr().out
    assert code == 0
    assert "30 nodes" in printed and "fgd" in printed and "random" in printed and "unalloc@100" in printed
    rows = list(csv.DictReader((out / "allocation.csv").open()))
    assert [(r["policy"], r["seed"]) for r in rows] == [("fgd", "42"), ("fgd", "43"), ("fgd", "44"),
                                                        ("random", "42"), ("random", "43"), ("random", "44")]
    summary = json.loads((out / "summary.json").read_text())
    fgd, random = summary["policies"]["fgd"], summary["policies"]["random"]
    assert fgd["100"]["mean"] > random["100"]["mean"]          # FGD packs better than random-fit here
    assert fgd["unallocated_gpus_at_100"] < random["unallocated_gpus_at_100"]


def test_the_plot_is_drawn(generated, tmp_path):
    pytest.importorskip("matplotlib")
    nodes, tasks = generated
    assert schedule_gpus_main(["--nodes", nodes, "--trace", tasks, "--policy", "best-fit", "--seeds", "2",
                               "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "allocation_vs_workload.png").stat().st_size > 10_000


@pytest.mark.parametrize("change, message", [
    (["--policy", "worst-fit"], "unknown policy 'worst-fit': use one of random, dot-product"),
    (["--seeds", "0"], "--seeds must be at least 1"),
    (["--ratio", "0"], r"--ratio must lie in \(0, 3\]"),
])
def test_bad_arguments_are_refused_with_the_fix(generated, capsys, change, message):
    nodes, tasks = generated
    assert schedule_gpus_main(["--nodes", nodes, "--trace", tasks, "--no-plot", "--out", "unused", *change]) == 2
    assert re.search(message, capsys.readouterr().err)


def test_a_missing_or_malformed_trace_says_where_and_what(generated, tmp_path, capsys):
    nodes, tasks = generated
    assert schedule_gpus_main(["--nodes", nodes, "--trace", str(tmp_path / "none.csv"), "--out",
                               str(tmp_path / "o"), "--no-plot"]) == 2
    err = capsys.readouterr().err
    assert "trace error" in err and "not shipped" in err and "alibaba/clusterdata" in err
    broken = tmp_path / "broken.csv"
    rows = list(csv.reader(open(tasks)))
    rows[7][rows[0].index("gpu_milli")] = "1000x"
    with broken.open("w", newline="") as handle:
        csv.writer(handle).writerows(rows)
    assert schedule_gpus_main(["--nodes", nodes, "--trace", str(broken), "--out", str(tmp_path / "o"),
                               "--no-plot"]) == 2
    assert f"{broken} line 8, column 'gpu_milli'" in capsys.readouterr().err
