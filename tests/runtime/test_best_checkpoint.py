"""The best and kept checkpoints of a real run (`checkpoint.keep_best`, `checkpoint.keep_every_frames`).

A short cartpole-apex run evaluates every 2,500 frames. `menger eval RUN --checkpoint best` plays
the evaluator's own episodes with the best checkpoint and gets exactly the highest eval/return_mean the run wrote
to metrics.jsonl; that checkpoint holds the very parameters the evaluator played (their digest); one checkpoint
per 10,000 frames is kept besides keep_last; export and load_policy take the same choice; a resume from the best
goes on from it, sets the newer checkpoints aside (kept) and never keeps a worse best than the one it had."""
import json
import shutil

import pytest
import torch

from menger import api
from menger.checkpoint import CheckpointManager, CheckpointNotFound
from menger.cli import main
from menger.commands.export import export_policy
from menger.config import ConfigError
from menger.experiment import load_experiment
from menger.runtime.keeping import params_digest

SETTINGS = ["runtime.launcher=threads", "runtime.actors=1", "runtime.learner.device=cpu", "runtime.learner.threads=1",
            "checkpoint.interval_s=0", "checkpoint.keep_last=1", "checkpoint.keep_best=true",
            "checkpoint.keep_every_frames=10000", "stop.target_return=null", "stop.env_frames=25000",
            "eval.interval_s=0", "eval.interval_frames=2500", "eval.episodes=5"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("best") / "run"
    api.train("cartpole-apex", overrides=["log.tensorboard=false", "log.progress=false", *SETTINGS],
              run_dir=str(path))
    return path


def recorded_returns(run_dir):
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {row["eval/count"]: row["eval/return_mean"] for row in rows if "eval/return_mean" in row}


def test_menger_eval_of_the_best_reproduces_the_best_recorded_evaluation(run_dir, capsys):
    recorded = recorded_returns(run_dir)
    assert len(recorded) >= 5, recorded
    best = CheckpointManager(run_dir / "checkpoints").best()
    assert best["return_mean"] == max(recorded.values()) == recorded[best["evaluation"]]
    assert main(["eval", str(run_dir), "--checkpoint", "best"]) == 0  # the run's own evaluation episodes
    out = capsys.readouterr().out
    assert f"checkpoint: best = step {best['step']}" in out
    assert f"mean return: {best['return_mean']:.2f}" in out, out
    assert main(["eval", str(run_dir), "--checkpoint", "best", "--like-training"]) == 0
    assert f"mean return: {best['return_mean']:.2f}" in capsys.readouterr().out
    assert main(["eval", str(run_dir), "--checkpoint", "best", "--episodes", "2"]) == 0  # other episodes, asked for
    assert "episodes: 2 " in capsys.readouterr().out


def test_the_best_checkpoint_holds_the_parameters_the_evaluator_played(run_dir):
    best = CheckpointManager(run_dir / "checkpoints").best()
    policy = api.load_policy(run_dir, checkpoint="best")
    assert policy.checkpoint["step"] == best["step"]
    assert policy.checkpoint["evaluation"]["return_mean"] == best["return_mean"]
    assert params_digest(policy.network.state_dict()) == best["params_sha256"]
    assert api.load_policy(run_dir).checkpoint["step"] >= best["step"]


def test_keep_last_prunes_the_rest_but_the_best_and_one_per_keep_every_frames(run_dir):
    entries = CheckpointManager(run_dir / "checkpoints").entries()
    pinned = [entry.summary["frames"] for entry in entries if entry.pinned]
    assert [frames // 10_000 for frames in pinned] == [1, 2], pinned  # the first save at or past each multiple
    assert sum(entry.best for entry in entries) == 1
    unkept = [entry for entry in entries if not entry.pinned and not entry.best]
    assert len(unkept) <= 1 and entries[-1].summary["frames"] >= 25_000  # keep_last=1: the newest


def test_export_and_a_missing_step_take_the_same_choice(run_dir, tmp_path):
    best = CheckpointManager(run_dir / "checkpoints").best()
    path = export_policy(run_dir, tmp_path / "best.pt", checkpoint="best")
    extra = {"menger.json": ""}
    torch.jit.load(str(path), _extra_files=extra)
    assert json.loads(extra["menger.json"])["checkpoint"] == best["step"]
    with pytest.raises(CheckpointNotFound, match=r"checkpoint step 1 is not in .* = best"):
        api.load_policy(run_dir, checkpoint=1)


def test_keep_best_without_evaluations_is_refused():
    with pytest.raises(ConfigError, match=r"^checkpoint.keep_best=true keeps .* does not evaluate .*eval.interval_s=5"):
        load_experiment("cartpole-ppo", ["checkpoint.keep_best=true"])


def test_a_resume_from_the_best_goes_on_from_it_and_keeps_the_newer_checkpoints(run_dir, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    manager = CheckpointManager(copy / "checkpoints")
    best = manager.best()
    newer = [entry.step for entry in manager.entries() if entry.step > best["step"]]
    written = len((copy / "metrics.jsonl").read_text().splitlines())
    result = api.resume(copy, overrides=[f"stop.env_frames={best['frames'] + 5000}"], checkpoint="best")
    assert result.final_metrics["time/env_frames"] >= best["frames"] + 5000
    resumed = [json.loads(line) for line in (copy / "metrics.jsonl").read_text().splitlines()[written:]]
    assert best["frames"] <= resumed[0]["time/env_frames"] < best["frames"] + 2500  # from the best, not the end
    rewound = [path for path in (copy / "checkpoints").iterdir() if path.name.startswith("rewound-")]
    assert len(rewound) == (1 if newer else 0)
    if newer:
        assert sorted(entry.step for entry in CheckpointManager(rewound[0]).entries()) == newer
    after = CheckpointManager(copy / "checkpoints").best()
    assert after["return_mean"] >= best["return_mean"]  # never a worse best than the one it had
