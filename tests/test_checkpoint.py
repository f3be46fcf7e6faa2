"""Checkpoints: exact round trips, keep-last-N, loud fallback from damaged checkpoints, clean failure on a full disk."""

import errno
import hashlib
import json
import logging
import os
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from menger.checkpoint import (
    Checkpoint,
    CheckpointError,
    CheckpointFallbackWarning,
    CheckpointManager,
    flatten_state,
    unflatten_state,
)


def assert_identical(expected, actual, where="state"):
    """Same types, same structure, same bits (NaN and -0.0 included); an OrderedDict comes back as a dict."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{where}: {type(actual)} is not a dict"
        assert list(actual) == list(expected), f"{where}: keys differ"
        for key in expected:
            assert_identical(expected[key], actual[key], f"{where}.{key}")
        return
    assert type(actual) is type(expected), f"{where}: {type(actual)} != {type(expected)}"
    if isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), f"{where}: lengths differ"
        for index, (left, right) in enumerate(zip(expected, actual)):
            assert_identical(left, right, f"{where}[{index}]")
    elif isinstance(expected, torch.Tensor):
        assert (actual.dtype, actual.shape) == (expected.dtype, expected.shape), where
        as_bytes = lambda tensor: tensor.detach().contiguous().reshape(-1).view(torch.uint8)  # noqa: E731
        assert torch.equal(as_bytes(actual), as_bytes(expected)), f"{where}: tensor bits differ"
    elif isinstance(expected, (np.ndarray, np.generic)):
        assert (actual.dtype, actual.shape) == (expected.dtype, expected.shape), where
        assert actual.tobytes() == expected.tobytes(), f"{where}: array bits differ"
    elif isinstance(expected, float):
        assert actual.hex() == expected.hex(), f"{where}: {actual!r} != {expected!r}"
    else:
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"


def make_learner(seed):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Dropout(0.1), nn.Linear(8, 2))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    return model, optimizer, scheduler


def train(model, optimizer, scheduler, rng, steps):
    """Uses torch's global RNG (data, dropout) and a numpy Generator, so resuming must restore both."""
    for _ in range(steps):
        inputs = torch.randn(16, 4) + torch.from_numpy(rng.normal(size=(16, 1)).astype(np.float32))
        loss = model(inputs).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()


def capture(model, optimizer, scheduler, rng, counters):
    return {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "rng": {"torch": torch.get_rng_state(), "numpy": rng.bit_generator.state, "python": random.getstate()},
        "counters": counters,
    }


def realistic_state():
    model, optimizer, scheduler = make_learner(seed=1)
    rng = np.random.default_rng(7)
    train(model, optimizer, scheduler, rng, steps=3)
    state = capture(model, optimizer, scheduler, rng, {"env_steps": 48, "updates": 3, "epsilon": 0.25})
    state["replay"] = {
        "observations": np.arange(24, dtype=np.uint8).reshape(2, 3, 4),
        "priorities": np.array([0.5, np.nan, -0.0], dtype=np.float64),
        "actions": np.array([1, 2], dtype=np.uint16),
        "size": np.int64(2),
        "names": np.array(["a", "bc"]),
    }
    state["misc"] = {"label": "run-1", "nothing": None, "flag": True, "big": 2**127 + 5,
                     "inf": float("inf"), "half": torch.tensor([1.5], dtype=torch.bfloat16), "pair": (1, [2.0, None])}
    return state


def save_state(manager, step, state, **extra):
    tensors, structure = flatten_state(state)
    return manager.save(step, tensors, {"state": structure, **extra})


def file_hashes(directory):
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted(directory.iterdir())}


# -- flatten / unflatten -----------------------------------------------------------------------------------------


def test_flatten_round_trip_is_exact_and_metadata_is_json():
    state = realistic_state()
    tensors, structure = flatten_state(state)
    assert "model.0.weight" in tensors and "optimizer.state.0.exp_avg" in tensors
    json.dumps(structure)  # plain JSON: nothing to unpickle
    assert_identical(state, unflatten_state(tensors, json.loads(json.dumps(structure))))


def test_flatten_keeps_int_keys_and_big_ints():
    restored = unflatten_state(*flatten_state({"state": {0: {"n": 2**100}}, "tags": ["x"]}))
    assert restored == {"state": {0: {"n": 2**100}}, "tags": ["x"]}


def test_flatten_disambiguates_colliding_dotted_keys():
    state = {"a.b": torch.ones(1), "a": {"b": torch.zeros(1)}}
    tensors, structure = flatten_state(state)
    assert len(tensors) == 2
    assert_identical(state, unflatten_state(tensors, structure))


@pytest.mark.parametrize(("state", "message"), [
    ({"model": {"fn": print}}, "cannot checkpoint model.fn of type builtin_function_or_method"),
    ({"counts": {(1, 2): 3}}, "key (1, 2) is tuple"),
    ({"objects": np.array([object()])}, "holds Python objects"),
])
def test_flatten_refuses_what_it_cannot_restore(state, message):
    with pytest.raises(TypeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        flatten_state(state)


def test_unflatten_rejects_foreign_metadata():
    with pytest.raises(CheckpointError, match="expected 'menger.state/1'"):
        unflatten_state({}, {"format": "other"})
    with pytest.raises(CheckpointError, match="refers to tensor 'w'"):
        unflatten_state({}, {"format": "menger.state/1", "root": {"kind": "tensor", "key": "w"}})


# -- saving and loading --------------------------------------------------------------------------------------------


def test_resume_from_disk_continues_bit_for_bit(tmp_path):
    model, optimizer, scheduler = make_learner(seed=1)
    rng = np.random.default_rng(7)
    train(model, optimizer, scheduler, rng, steps=3)
    manager = CheckpointManager(tmp_path)
    save_state(manager, 3, capture(model, optimizer, scheduler, rng, {"updates": 3}))
    train(model, optimizer, scheduler, rng, steps=3)
    straight = model.state_dict()

    resumed_model, resumed_optimizer, resumed_scheduler = make_learner(seed=99)
    checkpoint = CheckpointManager(tmp_path).load_latest()
    state = unflatten_state(checkpoint.tensors, checkpoint.metadata["state"])
    resumed_model.load_state_dict(state["model"])
    resumed_optimizer.load_state_dict(state["optimizer"])
    resumed_scheduler.load_state_dict(state["scheduler"])
    torch.set_rng_state(state["rng"]["torch"])
    resumed_rng = np.random.default_rng()
    resumed_rng.bit_generator.state = state["rng"]["numpy"]
    train(resumed_model, resumed_optimizer, resumed_scheduler, resumed_rng, steps=3)

    assert checkpoint.step == 3 and state["counters"] == {"updates": 3}
    assert_identical(straight, resumed_model.state_dict())


def test_realistic_state_round_trips_through_disk(tmp_path):
    state = realistic_state()
    manager = CheckpointManager(tmp_path)
    path = save_state(manager, 10, state, run="demo")
    checkpoint = manager.load_latest()
    assert isinstance(checkpoint, Checkpoint)
    assert (checkpoint.step, checkpoint.path, checkpoint.metadata["run"]) == (10, path, "demo")
    assert_identical(state, unflatten_state(checkpoint.tensors, checkpoint.metadata["state"]))


def test_layout_and_manifest(tmp_path):
    path = CheckpointManager(tmp_path).save(42, {"w": torch.arange(6.0)}, {"note": "x"})
    assert path == tmp_path / "ckpt-000000000042"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-000000000042"]
    manifest = json.loads((path / "MANIFEST.json").read_bytes())
    assert manifest["step"] == 42 and manifest["format_version"] == 1
    for name in ("tensors.safetensors", "meta.json"):
        data = (path / name).read_bytes()
        assert manifest["files"][name] == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def test_views_and_shared_storage_are_saved(tmp_path):
    base = torch.arange(12.0).reshape(3, 4)
    tensors = {"base": base, "transposed": base.t(), "row": base[1], "same": base}
    manager = CheckpointManager(tmp_path)
    manager.save(1, tensors, {})
    loaded = manager.load_latest().tensors
    for name, tensor in tensors.items():
        assert torch.equal(loaded[name], tensor), name


def test_keeps_only_the_last_n(tmp_path):
    manager = CheckpointManager(tmp_path, keep_last=2)
    for step in (5, 10, 15, 20):
        manager.save(step, {"step": torch.tensor([step])}, {})
    assert [path.name for path in manager.list()] == ["ckpt-000000000015", "ckpt-000000000020"]
    assert manager.load_latest().step == 20
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-000000000015", "ckpt-000000000020"]


def test_keep_last_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="keep_last must be an integer >= 1"):
        CheckpointManager(tmp_path, keep_last=0)


def test_empty_directory_loads_nothing(tmp_path):
    assert CheckpointManager(tmp_path / "new").load_latest() is None


def test_stray_temporary_is_never_loaded_and_removed_at_next_save(tmp_path):
    manager = CheckpointManager(tmp_path)
    manager.save(1, {"x": torch.ones(2)}, {})
    stray = tmp_path / ".tmp-ckpt-000000000002-123-abc"
    stray.mkdir()
    (stray / "tensors.safetensors").write_bytes(b"half")
    assert manager.load_latest().step == 1
    manager.save(3, {"x": torch.ones(2)}, {})
    assert not stray.exists()
    assert [path.name for path in manager.list()] == ["ckpt-000000000001", "ckpt-000000000003"]


def test_metadata_must_be_json_and_nothing_is_written_otherwise(tmp_path):
    manager = CheckpointManager(tmp_path)
    with pytest.raises(TypeError, match="metadata must be JSON data"):
        manager.save(1, {}, {"array": np.zeros(2)})
    assert list(tmp_path.iterdir()) == []


# -- damaged checkpoints ---------------------------------------------------------------------------------------------


def flip_one_byte(path):
    target = path / "tensors.safetensors"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01
    target.write_bytes(bytes(data))


def truncate(path):
    target = path / "tensors.safetensors"
    target.write_bytes(target.read_bytes()[:-7])


def delete_manifest(path):
    (path / "MANIFEST.json").unlink()


def delete_metadata(path):
    (path / "meta.json").unlink()


def garble_manifest(path):
    (path / "MANIFEST.json").write_text("{not json")


@pytest.mark.parametrize(("damage", "reason"), [
    (flip_one_byte, "tensors.safetensors fails its sha256 check"),
    (truncate, "the manifest says"),
    (delete_manifest, "MANIFEST.json is missing"),
    (delete_metadata, "meta.json is missing"),
    (garble_manifest, "MANIFEST.json is unreadable"),
])
def test_damaged_newest_falls_back_loudly(tmp_path, caplog, damage, reason):
    manager = CheckpointManager(tmp_path)
    for step in (1, 2):
        manager.save(step, {"w": torch.full((64,), float(step))}, {"step": step})
    newest = tmp_path / "ckpt-000000000002"
    damage(newest)
    with caplog.at_level(logging.WARNING, logger="menger.checkpoint"):
        with pytest.warns(CheckpointFallbackWarning, match=str(newest)) as record:
            checkpoint = manager.load_latest()
    assert checkpoint.step == 1 and torch.equal(checkpoint.tensors["w"], torch.full((64,), 1.0))
    assert reason in str(record[0].message) and "falling back to checkpoint" in str(record[0].message)
    assert any(str(newest) in entry.getMessage() and entry.levelno == logging.WARNING for entry in caplog.records)


def test_all_damaged_raises_instead_of_starting_over(tmp_path):
    manager = CheckpointManager(tmp_path)
    for step in (1, 2):
        manager.save(step, {"w": torch.ones(4)}, {})
    flip_one_byte(tmp_path / "ckpt-000000000001")
    delete_manifest(tmp_path / "ckpt-000000000002")
    with pytest.raises(CheckpointError, match="refusing to start from scratch") as excinfo:
        manager.load_latest()
    assert "ckpt-000000000001: tensors.safetensors fails" in str(excinfo.value)
    assert "ckpt-000000000002: MANIFEST.json is missing" in str(excinfo.value)


def test_same_step_replaces_only_a_damaged_checkpoint(tmp_path):
    manager = CheckpointManager(tmp_path)
    manager.save(1, {"w": torch.zeros(2)}, {})
    with pytest.raises(CheckpointError, match="a valid checkpoint for step 1 already exists"):
        manager.save(1, {"w": torch.ones(2)}, {})
    flip_one_byte(tmp_path / "ckpt-000000000001")
    with pytest.warns(CheckpointFallbackWarning, match="removing damaged checkpoint"):
        manager.save(1, {"w": torch.ones(2)}, {})
    assert torch.equal(manager.load_latest().tensors["w"], torch.ones(2))


# -- disk full -----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("failing_file", ["tensors.safetensors", "meta.json", "MANIFEST.json"])
def test_disk_full_mid_write_fails_cleanly(tmp_path, monkeypatch, failing_file):
    manager = CheckpointManager(tmp_path)
    previous = manager.save(1, {"w": torch.arange(1000.0)}, {"step": 1})
    hashes_before = file_hashes(previous)
    real_write = os.write

    def write_half_then_fill_disk(fd, data):
        if Path(os.readlink(f"/proc/self/fd/{fd}")).name == failing_file:
            real_write(fd, bytes(data[: len(data) // 2]))
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write_half_then_fill_disk)
    with pytest.raises(CheckpointError, match=f"failed while writing {failing_file}: the disk is full"):
        manager.save(2, {"w": torch.arange(300_000.0)}, {"step": 2})
    monkeypatch.undo()

    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-000000000001"], "temporary directory left behind"
    unchanged = file_hashes(previous) == hashes_before
    print(f"disk full writing {failing_file}: save failed cleanly; previous checkpoint's hashes unchanged: "
          f"{unchanged}; it still loads")
    assert unchanged
    assert manager.load_latest().step == 1


def _rewrite_meta(path, edit):
    """Edit a checkpoint's meta.json and re-sign it: the sums match, only the contents are hostile."""
    from menger.checkpoint import META_FILE, MANIFEST_FILE, _manifest

    meta = json.loads((path / META_FILE).read_text())
    edit(meta)
    data = json.dumps(meta).encode()
    (path / META_FILE).write_bytes(data)
    manifest = json.loads((path / MANIFEST_FILE).read_text())
    tensors = (path / "tensors.safetensors").read_bytes()
    (path / MANIFEST_FILE).write_bytes(_manifest(manifest["step"], {"tensors.safetensors": tensors, META_FILE: data}))


def _set_dtype(node, dtype):
    if isinstance(node, dict):
        if node.get("kind") == "ndarray":
            node["dtype"] = dtype
        for value in node.values():
            _set_dtype(value, dtype)
    elif isinstance(node, list):
        for value in node:
            _set_dtype(value, dtype)


@pytest.mark.parametrize("edit", [
    lambda meta: _set_dtype(meta, "|O"),                           # an object array: refused, never built
    lambda meta: meta["root"].update(items=[["x", {"kind": "ndarray"}]]),  # an entry with missing fields
    lambda meta: meta["root"].update(items=[["x", {"kind": "tensor", "key": "nope"}]]),
], ids=["object-dtype", "missing-fields", "unknown-tensor"])
def test_a_malformed_meta_json_behind_a_matching_manifest_falls_back_to_the_previous_checkpoint(tmp_path, edit):
    manager = CheckpointManager(tmp_path / "ckpt", keep_last=3)
    for step in (1, 2):
        manager.save(step, *flatten_state({"x": np.arange(3) + step, "step": step}))
    _rewrite_meta(manager.list()[-1], edit)
    with pytest.warns(CheckpointFallbackWarning, match="falling back"):
        checkpoint = manager.load_latest()
    assert checkpoint.step == 1
    assert unflatten_state(checkpoint.tensors, checkpoint.metadata)["step"] == 1
