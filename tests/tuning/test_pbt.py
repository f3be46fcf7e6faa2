"""`menger tune --population`: the exploit and explore rules, a copy that continues bit for bit like its source,
a member whose process dies, a tune killed and run again, and the spec checked before anything starts."""
from __future__ import annotations

import json
import math
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from menger.checkpoint import CheckpointManager, unflatten_state
from menger.config import ConfigError
from menger.experiment import Tuned
from menger.tuning.lineage import read_lineage, schedules
from menger.tuning.members import ProcessMembers
from menger.tuning.pbt import copy_run, explore, pick_exploits, train_population

ROOT = Path(__file__).resolve().parents[2]
LR = "tune={ppo.lr: {log_uniform: [1.0e-4, 1.0e-2]}}"
SMALL = ["runtime.launcher=threads", "runtime.actors=1", "runtime.envs_per_actor=4", "runtime.unroll_length=16",
         "runtime.learner.device=cpu", "runtime.learner.threads=1", "ppo.lr_schedule=constant", "ppo.epochs=2",
         "ppo.minibatches=2", "log.tensorboard=false", "log.progress=false", "checkpoint.interval_s=0",
         "stop.target_return=null"]
BATCH = 4 * 16


# ----- the rules ------------------------------------------------------------------------------------------------
def test_the_bottom_quantile_copies_the_top_and_members_without_a_score_take_no_part():
    scores = {0: 10.0, 1: 50.0, 2: None, 3: 30.0, 4: 40.0, 5: 20.0, 6: 60.0, 7: 0.0, 8: 70.0}
    pairs = pick_exploits(scores, 0.25, random.Random(0))
    assert sorted(m for m, _ in pairs) == [0, 7]                 # 8 scored members: the bottom 2
    assert all(source in (6, 8) for _, source in pairs)         # copied from the top 2
    assert pick_exploits(scores, 0.0, random.Random(0)) == []   # fixed settings
    assert pick_exploits({0: None, 1: None}, 0.5, random.Random(0)) == []
    assert pick_exploits({0: 1.0, 1: 2.0, 2: None}, 0.25, random.Random(0)) == [(0, 1)]  # at least one copies


def test_a_failed_member_is_always_replaced_and_never_copied():
    pairs = pick_exploits({0: -math.inf, 1: 5.0, 2: 7.0, 3: 6.0}, 0.25, random.Random(1))
    assert pairs == [(0, 2)]
    assert pick_exploits({0: -math.inf, 1: -math.inf}, 0.5, random.Random(1)) == []


def test_explore_perturbs_within_the_range_rounds_integers_and_resamples():
    spec = [Tuned("ppo.lr", "log_uniform", 1e-4, 1e-2), Tuned("ppo.epochs", "int_uniform", 2, 10),
            Tuned("model.activation", "choice", choices=("tanh", "relu"))]
    values = {"ppo.lr": 1e-2, "ppo.epochs": 4, "model.activation": "tanh"}
    rng = random.Random(3)
    for _ in range(50):
        out, how = explore(values, spec, rng, resample=0.0)
        assert out["ppo.lr"] in (pytest.approx(0.8e-2), 1e-2)            # x1.2 is kept at the top of the range
        assert out["ppo.epochs"] in (3, 5) and isinstance(out["ppo.epochs"], int)
        assert out["model.activation"] == "tanh" and how["ppo.lr"] in ("x0.8", "x1.2")
    for _ in range(50):
        out, how = explore(values, spec, rng, resample=1.0)
        assert 1e-4 <= out["ppo.lr"] <= 1e-2 and 2 <= out["ppo.epochs"] <= 10
        assert set(how.values()) == {"resample"}


def test_a_copy_that_cannot_find_a_checkpoint_leaves_the_target_as_it_was(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    (target / "config.yaml").write_text("mine")
    with pytest.raises(RuntimeError, match="no checkpoint"):
        copy_run(tmp_path / "source", target)
    assert (target / "config.yaml").read_text() == "mine"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


# ----- validation -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("overrides, kwargs, words", [
    (["tune={ppo.lrr: {log_uniform: [1.0e-4, 1.0e-2]}}"], {}, "'ppo.lrr' names no config value"),
    (["tune={ppo.lr: {uniform: [0.1, 0.01]}}"], {}, "low < high"),
    (["tune={}"], {}, "add a `tune:` section"),
    ([LR], {"size": 1}, "at least 2 members"),
    ([LR], {"quantile": 0.7}, "--quantile 0.7"),
    ([LR], {"ready": 10}, "fewer env frames than one learner batch"),
    ([LR, "stop.env_frames=null", "stop.wall_clock_s=60"], {}, "set stop.env_frames"),
])
def test_a_bad_population_is_refused_naming_what_before_anything_starts(overrides, kwargs, words, tmp_path):
    kwargs = {"size": 2, **kwargs}
    with pytest.raises(ConfigError, match=words):
        train_population("cartpole-ppo", tmp_path / "out", kwargs.pop("size"), [*SMALL, *overrides],
                         executor="inline", **kwargs)
    assert not (tmp_path / "out").exists()


# ----- the copy -------------------------------------------------------------------------------------------------
def _model(run_dir: Path):
    checkpoint = CheckpointManager(run_dir / "checkpoints").load_latest()
    state = unflatten_state(checkpoint.tensors, checkpoint.metadata)
    return checkpoint.step, state["learner"]


def test_an_exploit_copies_a_member_so_the_copy_continues_bit_for_bit_like_its_source(tmp_path):
    """Two members (threads, sync); after the first segment the worse copies the better with its values unchanged
    (perturb x1), and after the second both hold the same weights and optimizer state, bit for bit: the copy took
    the source's weights, optimizer moments, counters, RNGs and actors' envs together."""
    out = tmp_path / "pbt"
    result = train_population("cartpole-ppo", out, 2, [*SMALL, LR, f"stop.env_frames={4 * BATCH}"],
                              ready=2 * BATCH, quantile=0.5, resample=0.0, perturb=(1.0,), executor="inline")
    exploits = [r for r in read_lineage(out) if r["event"] == "exploit"]
    assert [r["generation"] for r in exploits] == [0]
    copy, source = exploits[0]["member"], exploits[0]["source"]
    step_copy, copied = _model(out / f"members/member-{copy:02d}")
    step_source, original = _model(out / f"members/member-{source:02d}")
    assert step_copy == step_source == 4
    for name, tensor in original["model"].items():
        assert torch.equal(tensor, copied["model"][name]), f"{name} differs between the copy and its source"
    moments = original["optimizer"]["state"]
    for key, state in moments.items():
        assert torch.equal(state["exp_avg"], copied["optimizer"]["state"][key]["exp_avg"])
    assert [m.values for m in result.members][copy] == [m.values for m in result.members][source]
    assert (out / "lineage.png").stat().st_size > 0 and json.loads((out / "best.json").read_text())["run_dir"]


def test_without_the_copy_the_two_members_differ(tmp_path):
    """The check above can fail: two members that do not copy end with different weights."""
    out = tmp_path / "fixed"
    train_population("cartpole-ppo", out, 2, [*SMALL, LR, f"stop.env_frames={4 * BATCH}"], ready=2 * BATCH,
                     quantile=0.0, executor="inline")
    assert not [r for r in read_lineage(out) if r["event"] == "exploit"]
    _, a = _model(out / "members/member-00")
    _, b = _model(out / "members/member-01")
    assert any(not torch.equal(t, b["model"][n]) for n, t in a["model"].items())
    tracks = schedules(read_lineage(out))
    assert [frames for frames, _, _ in tracks[0]] == [0, 2 * BATCH, 4 * BATCH]


# ----- faults ---------------------------------------------------------------------------------------------------
def test_a_member_whose_process_dies_restarts_from_its_last_checkpoint(tmp_path):
    out = tmp_path / "pbt"
    members = ProcessMembers(out)
    killed: list[int] = []

    def kill_one_after_its_first_checkpoint():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not killed:
            for member, process in list(members.running.items()):
                checkpoints = out / "members" / f"member-{member:02d}" / "checkpoints"
                if checkpoints.is_dir() and list(checkpoints.glob("ckpt-*")) and process.poll() is None:
                    process.kill()
                    killed.append(member)
                    break
            time.sleep(0.02)

    killer = threading.Thread(target=kill_one_after_its_first_checkpoint, daemon=True)
    killer.start()
    result = train_population("cartpole-ppo", out, 2,
                              [*SMALL, LR, "checkpoint.interval_updates=1", f"stop.env_frames={40 * BATCH}"],
                              ready=20 * BATCH, quantile=0.5, executor=members)
    killer.join(timeout=5)
    assert killed, "no member was killed: the test did not run its fault"
    restarts = [r for r in read_lineage(out) if r["event"] == "restart"]
    assert [r["member"] for r in restarts] == killed
    log_text = (out / "members" / f"member-{killed[0]:02d}.log").read_text()
    assert "resumed from ckpt-" in log_text
    assert all(m.frames == 40 * BATCH for m in result.members)


def test_a_killed_tune_goes_on_where_it_was_when_run_again(tmp_path):
    out = tmp_path / "pbt"
    command = [sys.executable, "-m", "menger.cli", "tune", "cartpole-ppo", "--population", "2", "--out", str(out),
               "--ready", str(8 * BATCH), "--quantile", "0.5",
               *(arg for setting in [*SMALL, LR, f"stop.env_frames={32 * BATCH}"] for arg in ("--set", setting))]
    env = dict(os.environ)
    first = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:  # killed once the first generation is recorded
        if any(r["event"] == "ready" and r["generation"] >= 1 for r in read_lineage(out)):
            break
        assert first.poll() is None, first.stdout.read().decode()
        time.sleep(0.05)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    state = json.loads((out / "population.json").read_text())
    assert not state["done"] and state["generation"] >= 1
    second = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "resuming the population" in second.stdout
    state = json.loads((out / "population.json").read_text())
    assert state["done"] and all(m["frames"] == 32 * BATCH for m in state["members"])
    starts = [r for r in read_lineage(out) if r["event"] == "start"]
    assert len(starts) == 2  # the same population, not a new one
    best = json.loads((out / "best.json").read_text())
    assert Path(best["run_dir"]).is_dir()


def test_a_population_whose_members_run_out_of_wall_clock_ends(tmp_path):
    """stop.wall_clock_s ends a member before its segment does: it is done (stopped), not resumed for ever."""
    out = tmp_path / "pbt"
    result = train_population("cartpole-ppo", out, 2,
                              [*SMALL, LR, "stop.env_frames=100000000", "stop.wall_clock_s=0.5"],
                              ready=BATCH, quantile=0.5, executor="inline")
    assert all(m.status == "stopped" and m.frames < 100_000_000 for m in result.members)
    assert {r["member"] for r in read_lineage(out) if r["event"] == "stopped"} == {0, 1}


def test_a_minimised_metric_copies_the_member_with_the_smallest(tmp_path):
    out = tmp_path / "pbt"
    result = train_population("cartpole-ppo", out, 2, [*SMALL, LR, f"stop.env_frames={2 * BATCH}"], ready=BATCH,
                              quantile=0.5, resample=0.0, direction="minimize", executor="inline")
    exploit = next(r for r in read_lineage(out) if r["event"] == "exploit")
    assert exploit["source_score"] < exploit["score"]  # the lower return is the better one here
    assert result.best is not None
