"""The checkpoints that outlive keep_last, and choosing one: the best (BEST.json) and the pinned ones survive every
prune, a damaged best is refused naming it (never silently replaced by another), a step that is not there is
refused listing those that are, a rewind sets the newer checkpoints aside without deleting them; and the keeping
rules (`menger.runtime.keeping`): a resume never keeps a worse best, a NaN evaluation is never the best, one
checkpoint kept per keep_every_frames."""
import json
from types import SimpleNamespace

import pytest
import torch

from menger.checkpoint import BEST_FILE, TENSORS_FILE, CheckpointError, CheckpointManager, CheckpointNotFound, \
    parse_step
from menger.runtime.keeping import CheckpointKeeping, params_digest


def save(manager, step, **kwargs):
    return manager.save(step, {"w": torch.full((3,), float(step))}, {"step": step},
                        summary={"frames": step * 100}, **kwargs)


def steps(manager):
    return [entry.step for entry in manager.entries()]


def test_the_best_survives_keep_last_until_a_new_best_replaces_it(tmp_path):
    manager = CheckpointManager(tmp_path, keep_last=2)
    for step in (1, 2):
        save(manager, step)
    manager.mark_best(2, {"return_mean": 10.0})
    for step in (3, 4, 5):
        save(manager, step)
    assert steps(manager) == [2, 4, 5]  # 1 and 3 pruned; 2 is the best
    assert manager.load("best").tensors["w"][0].item() == 2.0
    assert manager.best() == {"step": 2, "return_mean": 10.0}
    manager.mark_best(5, {"return_mean": 20.0})
    assert steps(manager) == [4, 5]  # the old best goes once BEST.json names the new one
    assert [entry.best for entry in manager.entries()] == [False, True]


def test_pinned_checkpoints_are_never_pruned(tmp_path):
    manager = CheckpointManager(tmp_path, keep_last=2)
    for step in range(1, 8):
        save(manager, step, pinned=step in (2, 4))
    assert steps(manager) == [2, 4, 6, 7]
    assert [entry.describe() for entry in manager.entries()][:2] == ["step 2 (200 frames, kept)",
                                                                     "step 4 (400 frames, kept)"]
    assert manager.load(4).step == 4 and manager.load("4").step == 4


def test_a_crash_before_the_best_is_named_leaves_the_old_best_in_place(tmp_path):
    manager = CheckpointManager(tmp_path, keep_last=1)
    save(manager, 1)
    manager.mark_best(1, {"return_mean": 1.0})
    save(manager, 2)  # the new best saved, then the process dies before mark_best
    reopened = CheckpointManager(tmp_path, keep_last=1)
    assert reopened.best()["step"] == 1 and reopened.load("best").step == 1


def test_a_step_that_is_not_there_is_refused_listing_those_that_are(tmp_path):
    manager = CheckpointManager(tmp_path, keep_last=3)
    for step in (10, 20):
        save(manager, step)
    manager.mark_best(10, {"return_mean": 3.0})
    with pytest.raises(CheckpointNotFound, match=r"checkpoint step 15 is not in .*step 10 \(1000 frames\) = best; "
                                                 r"step 20 \(2000 frames\)"):
        manager.load(15)
    with pytest.raises(ValueError, match="give latest, best, or a checkpoint's step"):
        parse_step("newest")


def test_no_best_says_how_to_keep_one(tmp_path):
    manager = CheckpointManager(tmp_path)
    save(manager, 1)
    with pytest.raises(CheckpointNotFound, match="checkpoint.keep_best=true.*step 1"):
        manager.load("best")


def test_a_damaged_best_is_refused_naming_it_and_the_others_still_load(tmp_path):
    manager = CheckpointManager(tmp_path, keep_last=2)
    best = save(manager, 1)
    manager.mark_best(1, {"return_mean": 5.0})
    save(manager, 2)
    data = bytearray((best / TENSORS_FILE).read_bytes())
    data[-1] ^= 0xFF
    (best / TENSORS_FILE).write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"the best checkpoint \(step 1, named by BEST.json\) .* is unusable "
                                              r"\(tensors.safetensors fails its sha256 check.*choose another: "):
        manager.load("best")
    assert manager.load("latest").step == 2


def test_an_unreadable_best_file_says_what_to_do(tmp_path):
    manager = CheckpointManager(tmp_path)
    save(manager, 1)
    (tmp_path / BEST_FILE).write_text("{not json")
    with pytest.raises(CheckpointError, match="BEST.json is unreadable .*delete it"):
        manager.load("best")
    save(manager, 2)  # saving and pruning go on past it
    assert steps(manager) == [1, 2]


def test_saving_over_a_damaged_best_drops_the_best(tmp_path):
    """A resume that fell back past a damaged best saves that step again: BEST.json must not name the new state."""
    manager = CheckpointManager(tmp_path)
    save(manager, 1)
    best = save(manager, 2)
    manager.mark_best(2, {"return_mean": 5.0})
    (best / TENSORS_FILE).write_bytes(b"garbage")
    with pytest.warns(UserWarning, match="named that damaged checkpoint"):
        save(manager, 2)
    assert manager.best() is None


def test_a_rewind_sets_the_newer_checkpoints_and_their_best_aside(tmp_path):
    manager = CheckpointManager(tmp_path, keep_last=5)
    for step in (1, 2, 3, 4):
        save(manager, step)
    manager.mark_best(3, {"return_mean": 9.0})
    folder = manager.set_aside_after(2)
    assert sorted(path.name for path in folder.iterdir()) == [BEST_FILE, "ckpt-000000000003", "ckpt-000000000004"]
    assert steps(manager) == [1, 2] and manager.best() is None
    save(manager, 3)  # the rewound run saves its own step 3
    assert manager.set_aside_after(3) is None
    kept = CheckpointManager(folder)  # nothing was deleted: the set-aside checkpoints still load
    assert kept.load("best").step == 3 and kept.load(4).tensors["w"][0].item() == 4.0


def test_a_rewind_to_the_best_keeps_it(tmp_path):
    manager = CheckpointManager(tmp_path, keep_last=5)
    for step in (1, 2, 3):
        save(manager, step)
    manager.mark_best(2, {"return_mean": 9.0})
    manager.set_aside_after(2)
    assert manager.best()["step"] == 2 and steps(manager) == [1, 2]


def test_a_stray_temporary_best_file_is_removed(tmp_path):
    manager = CheckpointManager(tmp_path)
    stray = tmp_path / ".tmp-best-999999999-0123abcd"  # a pid that cannot be alive
    stray.write_text("{}")
    save(manager, 1)
    assert not stray.exists()


# ----- the keeping rules ---------------------------------------------------------------------------------------

def keeping(best=None, frames=0, keep_best=True, every=0):
    return CheckpointKeeping(SimpleNamespace(keep_best=keep_best, keep_every_frames=every), best, frames)


def stats(mean):
    return {"eval/return_mean": mean, "eval/return_std": 0.0, "eval/episodes": 10, "eval/count": 1}


def test_a_resume_never_keeps_a_worse_best():
    resumed = keeping(best={"step": 7, "return_mean": 200.0})
    assert not resumed.beaten_by(stats(150.0)) and not resumed.beaten_by(stats(200.0))
    assert resumed.beaten_by(stats(201.0))
    fresh = keeping()
    assert fresh.beaten_by(stats(-1e9)) and not fresh.beaten_by(stats(float("nan")))
    fresh.kept_best(fresh.record(stats(5.0), "d", step=1, frames=10, version=1))
    assert not fresh.beaten_by(stats(4.0))
    assert not keeping(keep_best=False).beaten_by(stats(1.0))


def test_one_checkpoint_is_kept_per_keep_every_frames():
    rule = keeping(every=1000, frames=0, keep_best=False)
    assert not rule.pin_due(999) and rule.pin_due(1000)
    rule.pinned(1700)  # the checkpoint that crossed 1000 came at 1700: the next one at 2000
    assert not rule.pin_due(1999) and rule.pin_due(2300)
    assert keeping(every=1000, frames=2500).next_frames == 3000  # a resume: the next multiple
    assert not keeping(every=0).pin_due(10**9)


def test_the_digest_is_of_names_and_bits():
    state = {"a": torch.ones(2), "b": torch.zeros(3, dtype=torch.int64)}
    assert params_digest(state) == params_digest({"b": state["b"].clone(), "a": state["a"].clone()})
    assert params_digest(state) != params_digest({**state, "a": torch.tensor([1.0, 1.0 + 2**-20])})
    assert params_digest(state) != params_digest({"c": state["a"], "b": state["b"]})


def test_the_manifest_records_summary_and_pin(tmp_path):
    path = save(CheckpointManager(tmp_path), 3, pinned=True)
    manifest = json.loads((path / "MANIFEST.json").read_text())
    assert manifest["summary"] == {"frames": 300} and manifest["pinned"] is True
