"""Crash-consistent checkpoints: a directory per step, verified by a manifest, never unpickled.

Layout of one checkpoint (``ckpt-000000001000/``)::

    tensors.safetensors   every tensor, by dotted name (safetensors: no code runs on load)
    meta.json             JSON metadata, e.g. the structure from flatten_state and the run's counters
    MANIFEST.json         size and sha256 of the two files above, the step and the format version; written last

A save writes everything into a temporary sibling (``.tmp-...``), fsyncs each file and the directory, renames the
directory into place and fsyncs the parent; so after a crash at any instant a ``ckpt-*`` directory is either
complete or absent. Loading checks the manifest and falls back to the previous checkpoint, loudly, if the newest
is damaged. The learner's loop::

    manager = CheckpointManager(run_dir / "checkpoints", keep_last=3)
    if (checkpoint := manager.load_latest()) is not None:      # or manager.load("best"), manager.load(step)
        state = unflatten_state(checkpoint.tensors, checkpoint.metadata["state"])
        ...restore model, optimizer, RNGs and counters from state...
    while training:
        ...
        tensors, structure = flatten_state(state)
        manager.save(step, tensors, {"state": structure}, summary={"frames": n}, pinned=every_n_frames_passed)
        if evaluation_beat_the_best:
            manager.mark_best(step, {"return_mean": r})         # BEST.json names it; the old best may go

Besides the newest ``keep_last``, two kinds of checkpoint are never pruned: a ``pinned`` one (the MANIFEST says
so; `checkpoint.keep_every_frames`) and the one ``BEST.json`` names. ``BEST.json`` is replaced atomically after
the checkpoint it names is in place, and the old best is pruned only after that, so after a crash it names a
complete checkpoint. A checkpoint is named by its step (the learner's update count); the MANIFEST's ``summary``
(e.g. the env frames) lets a listing say more without reading the tensors.
"""

from __future__ import annotations

import builtins
import errno
import hashlib
import json
import logging
import os
import re
import shutil
import time
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import safetensors.torch
import torch

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "CheckpointFallbackWarning",
    "CheckpointEntry",
    "CheckpointManager",
    "CheckpointNotFound",
    "flatten_state",
    "unflatten_state",
]

FORMAT_VERSION = 1
TENSORS_FILE = "tensors.safetensors"
META_FILE = "meta.json"
MANIFEST_FILE = "MANIFEST.json"
BEST_FILE = "BEST.json"
_PREFIX = "ckpt-"
_TEMP_PREFIX = ".tmp-"
_NAME = re.compile(r"ckpt-(\d{12})")
_WRITE_CHUNK = 1 << 20

logger = logging.getLogger("menger.checkpoint")


class CheckpointError(RuntimeError):
    """A checkpoint could not be written, or none of the existing ones can be read."""


class CheckpointNotFound(CheckpointError, LookupError):
    """The checkpoint asked for (best, a step) is not in the directory; the message lists those that are."""


class CheckpointFallbackWarning(UserWarning):
    """The newest checkpoint was damaged and an older one was loaded instead."""


@dataclass(frozen=True)
class Checkpoint:
    """One verified checkpoint, read back into memory (tensors on the CPU)."""

    step: int
    path: Path
    tensors: dict[str, torch.Tensor]
    metadata: dict


@dataclass(frozen=True)
class CheckpointEntry:
    """One checkpoint in a listing, from its MANIFEST alone (contents not verified)."""

    step: int
    path: Path
    summary: dict
    pinned: bool
    best: bool

    def describe(self) -> str:
        """`step 120 (38400 frames, best: eval return 500)`: what a user picks from."""
        notes = [f"{self.summary['frames']} frames"] if isinstance(self.summary.get("frames"), int) else []
        if self.pinned:
            notes.append("kept")
        return f"step {self.step}" + (f" ({', '.join(notes)})" if notes else "") + (" = best" if self.best else "")


class CheckpointManager:
    """Saves numbered checkpoints into one directory, keeps the newest ``keep_last`` (and the pinned ones and the
    best), loads the newest valid one, the best or a given step.

    One process writes to a directory at a time (the learner); any process may read.
    """

    def __init__(self, directory: str | os.PathLike, keep_last: int = 3):
        if not isinstance(keep_last, int) or isinstance(keep_last, bool) or keep_last < 1:
            raise ValueError(f"keep_last must be an integer >= 1, got {keep_last!r}; keep at least the newest one")
        self.directory = Path(directory)
        self.keep_last = keep_last
        self.directory.mkdir(parents=True, exist_ok=True)

    # -- writing ---------------------------------------------------------------------------------------------

    def save(self, step: int, tensors: dict[str, torch.Tensor], metadata: dict, *, summary: dict | None = None,
             pinned: bool = False) -> Path:
        """Write checkpoint ``step`` atomically and return its path; older ones beyond ``keep_last`` are removed,
        but for the pinned ones and the best. `summary`: a little JSON data kept in the MANIFEST for listings
        (e.g. ``{"frames": n}``); `pinned`: never pruned."""
        _check_step(step)
        tensor_bytes = _serialize_tensors(tensors)
        meta_bytes = _serialize_metadata(metadata)
        extra = {"summary": _json_data(summary or {}, "summary"), "pinned": bool(pinned)}
        self._remove_stray_temporaries()
        final = self.directory / _directory_name(step)
        self._clear_way_for(final, step)
        temporary = self.directory / f"{_TEMP_PREFIX}{final.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        stage = "creating the temporary directory"
        try:
            temporary.mkdir()
            stage = f"writing {TENSORS_FILE}"
            _write_durably(temporary / TENSORS_FILE, tensor_bytes)
            stage = f"writing {META_FILE}"
            _write_durably(temporary / META_FILE, meta_bytes)
            stage = f"writing {MANIFEST_FILE}"
            manifest = _manifest(step, {TENSORS_FILE: tensor_bytes, META_FILE: meta_bytes}, extra)
            _write_durably(temporary / MANIFEST_FILE, manifest)
            stage = "syncing the temporary directory"
            _fsync_directory(temporary)
            stage = f"moving it into place as {final.name}"
            os.rename(temporary, final)
            stage = "syncing the checkpoint directory"
            _fsync_directory(self.directory)
        except BaseException as error:
            shutil.rmtree(temporary, ignore_errors=True)
            if isinstance(error, OSError):
                raise CheckpointError(
                    f"saving checkpoint step {step} in {self.directory} failed while {stage}: {_os_reason(error)}; "
                    f"the temporary files were removed and earlier checkpoints are untouched"
                ) from error
            raise
        self._prune()
        return final

    def _clear_way_for(self, final: Path, step: int) -> None:
        """Replace an existing checkpoint of the same step only when it is damaged (e.g. a resume after a crash).

        A valid one is never overwritten: a second, different state for the same step is a bug in the caller.
        """
        if not final.exists():
            return
        try:
            _read_verified(final)
        except CheckpointError as damage:
            _warn_loudly(f"removing damaged checkpoint {final} ({damage}) to save the same step again")
            if self._best_step() == step:  # BEST.json must never name a checkpoint that was not evaluated
                _warn_loudly(f"{self.directory / BEST_FILE} named that damaged checkpoint; the run keeps a new best "
                             f"from its next evaluation")
                (self.directory / BEST_FILE).unlink(missing_ok=True)
            self._discard(final)
            return
        raise CheckpointError(f"a valid checkpoint for step {step} already exists at {final}; steps must increase "
                              f"between saves (delete that directory to overwrite it)")

    def mark_best(self, step: int, record: dict) -> None:
        """Name checkpoint ``step`` the best in ``BEST.json`` (``{"step": step, **record}``, replaced atomically),
        then prune the old best if nothing else keeps it."""
        path = self.directory / _directory_name(step)
        if not (path / MANIFEST_FILE).is_file():
            raise CheckpointError(f"cannot name step {step} the best: {path} is not a saved checkpoint; save it first")
        data = json.dumps({"step": step, **_json_data(record, "the best's record")}, indent=1).encode("utf-8")
        temporary = self.directory / f"{_TEMP_PREFIX}best-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            _write_durably(temporary, data)
            os.replace(temporary, self.directory / BEST_FILE)
            _fsync_directory(self.directory)
        except OSError as error:
            temporary.unlink(missing_ok=True)
            raise CheckpointError(f"naming checkpoint step {step} the best in {self.directory} failed: "
                                  f"{_os_reason(error)}; {BEST_FILE} still names the previous best") from error
        self._prune()

    def best(self) -> dict | None:
        """What ``BEST.json`` records (its ``step``, and e.g. the evaluation's return); None when there is none."""
        path = self.directory / BEST_FILE
        try:
            record = json.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as error:
            raise CheckpointError(f"{path} is unreadable ({error}); delete it to keep a new best from the next "
                                  f"evaluation, or load --checkpoint latest or a step") from error
        if not isinstance(record, dict) or not isinstance(record.get("step"), int):
            raise CheckpointError(f"{path} names no step; delete it to keep a new best from the next evaluation")
        return record

    def _best_step(self) -> int | None:
        try:
            record = self.best()
        except CheckpointError:
            return None
        return None if record is None else record["step"]

    def set_aside_after(self, step: int) -> Path | None:
        """Move every checkpoint newer than ``step`` (and ``BEST.json`` when it names one of them) into a new
        folder ``rewound-<time>/`` beside them, where nothing prunes or loads them: a run that goes on from
        ``step`` saves its own steps after it, and nothing the user had is deleted. The folder, or None."""
        newer = [path for path in self._checkpoint_directories() if _step_of(path) > step]
        best = self._best_step()
        if not newer:
            return None
        folder = self.directory / f"rewound-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"
        folder.mkdir()
        for path in newer:
            os.rename(path, folder / path.name)
        if best is not None and best > step:
            os.rename(self.directory / BEST_FILE, folder / BEST_FILE)
        _fsync_directory(self.directory)
        return folder

    def _prune(self) -> None:
        """Delete the oldest checkpoints beyond keep_last, but the pinned ones and the best; called only once the
        new one is in place."""
        best = self._best_step()
        for path in self._checkpoint_directories()[: -self.keep_last]:
            if _step_of(path) == best or _manifest_says_pinned(path):
                continue
            try:
                self._discard(path)
            except OSError as error:  # the new checkpoint is safe; an old one lingering is only a waste of space
                logger.warning("could not remove old checkpoint %s: %s", path, error)

    def _discard(self, path: Path) -> None:
        # Renaming first is atomic, so a crash mid-delete leaves only a stray temporary, never a half-deleted ckpt.
        doomed = self.directory / f"{_TEMP_PREFIX}delete-{path.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        os.rename(path, doomed)
        shutil.rmtree(doomed, ignore_errors=True)

    def _remove_stray_temporaries(self) -> None:
        """Remove temporaries of this process's interrupted saves and of processes that are gone; another live
        process's save in progress is left alone (its name carries its pid)."""
        for path in self.directory.glob(f"{_TEMP_PREFIX}*"):
            owner = _temporary_owner(path.name)
            if owner is not None and owner != os.getpid() and _process_alive(owner):
                continue
            logger.info("removing %s, left by an interrupted save", path)
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)

    # -- reading ---------------------------------------------------------------------------------------------

    def list(self) -> builtins.list[Path]:
        """Checkpoints that were moved into place with a manifest, oldest first (contents not yet verified)."""
        return [path for path in self._checkpoint_directories() if (path / MANIFEST_FILE).is_file()]

    def entries(self) -> builtins.list[CheckpointEntry]:
        """The checkpoints in place, oldest first, with what their MANIFESTs say (contents not yet verified)."""
        best = self._best_step()
        out: builtins.list[CheckpointEntry] = []
        for path in self.list():
            try:
                manifest = json.loads((path / MANIFEST_FILE).read_bytes())
            except (OSError, ValueError):
                manifest = {}
            manifest = manifest if isinstance(manifest, dict) else {}
            step = _step_of(path)
            summary = manifest["summary"] if isinstance(manifest.get("summary"), dict) else {}
            out.append(CheckpointEntry(step, path, summary, manifest.get("pinned") is True, step == best))
        return out

    def available(self) -> str:
        """The checkpoints one may ask for, as a user reads them (for error messages)."""
        entries = self.entries()
        if not entries:
            return f"{self.directory} holds no checkpoint"
        return "; ".join(entry.describe() for entry in entries)

    def load(self, which: str | int = "latest") -> Checkpoint:
        """``"latest"`` (the newest that verifies, falling back loudly past damaged ones), ``"best"`` (the one
        ``BEST.json`` names) or a step (an int, or its digits): that checkpoint, verified. CheckpointNotFound
        (listing what there is) when it is not there; CheckpointError when it is damaged (no silent fallback to
        another than the one asked for)."""
        if which == "latest":
            checkpoint = self.load_latest()
            if checkpoint is None:
                raise CheckpointNotFound(f"{self.directory} holds no checkpoint yet; train longer or wait for the "
                                         f"first checkpoint")
            return checkpoint
        path, what = self.find(which)
        try:
            return _read_verified(path)
        except CheckpointError as error:
            raise CheckpointError(f"{what} at {path} is unusable ({error}); choose another: "
                                  f"{self.available()}") from error

    def find(self, which: str | int) -> tuple[Path, str]:
        """Where ``"best"`` or a step is, and how to name it, without reading it: CheckpointNotFound (listing
        what there is) when it is not there. Checks a choice before anything else happens (a resume)."""
        if which == "best":
            record = self.best()
            if record is None:
                raise CheckpointNotFound(
                    f"{self.directory} has no best checkpoint: the run was trained without checkpoint.keep_best=true, "
                    f"or no evaluation has finished yet; choose latest or a step: {self.available()}")
            step, what = record["step"], f"the best checkpoint (step {record['step']}, named by {BEST_FILE})"
        else:
            step = parse_step(which)
            what = f"checkpoint step {step}"
        path = self.directory / _directory_name(step)
        if not (path / MANIFEST_FILE).is_file():
            raise CheckpointNotFound(f"{what} is not in {self.directory}; there: {self.available()}")
        return path, what

    def load_latest(self) -> Checkpoint | None:
        """The newest checkpoint that verifies; None only when the directory holds no checkpoint at all.

        Damaged newer checkpoints are skipped with a warning naming each; if every checkpoint is damaged this
        raises CheckpointError rather than let training silently start from scratch.
        """
        candidates = self._checkpoint_directories()
        damaged: builtins.list[tuple[Path, str]] = []
        for path in reversed(candidates):
            try:
                checkpoint = _read_verified(path)
            except CheckpointError as error:
                damaged.append((path, str(error)))
                continue
            if damaged:
                _warn_loudly(f"falling back to checkpoint {path}: " + "; ".join(
                    f"{bad} is unusable ({reason})" for bad, reason in damaged))
            return checkpoint
        if not damaged:
            return None
        raise CheckpointError(
            f"all {len(damaged)} checkpoint(s) in {self.directory} are damaged, refusing to start from scratch: "
            + "; ".join(f"{bad.name}: {reason}" for bad, reason in damaged)
            + ". Restore a backup, or move the directory away to deliberately start a new run."
        )

    def _checkpoint_directories(self) -> builtins.list[Path]:
        found = [path for path in self.directory.iterdir() if _NAME.fullmatch(path.name) and path.is_dir()]
        return sorted(found, key=lambda path: path.name)


# -----------------------------------------------------------------------------------------------------------------
# Files on disk


_TEMPORARY = re.compile(re.escape(_TEMP_PREFIX) + r"(?:(?:delete-)?ckpt-\d{12}|best)-(\d+)-[0-9a-f]{8}")


def _temporary_owner(name: str) -> int | None:
    """The pid in a temporary's name (`.tmp-ckpt-STEP-PID-HEX`), None for a name without one."""
    match = _TEMPORARY.fullmatch(name)
    return int(match.group(1)) if match else None


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def _step_of(path: Path) -> int:
    """The step of a checkpoint directory that `_NAME` matched (`ckpt-000000001331` -> 1331)."""
    return int(path.name[len(_PREFIX):])


def _directory_name(step: int) -> str:
    return f"{_PREFIX}{step:012d}"


def parse_step(which: str | int) -> int:
    """A checkpoint's step from `--checkpoint STEP` (digits) or an int; ValueError says what may be given."""
    if isinstance(which, int) and not isinstance(which, bool):
        _check_step(which)
        return which
    text = str(which).strip()
    if text.isdigit():
        return parse_step(int(text))
    raise ValueError(f"--checkpoint {which!r}: give latest, best, or a checkpoint's step (the learner's update count, "
                     f"the number in checkpoints/ckpt-STEP)")


def _check_step(step: int) -> None:
    if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step < 10**12:
        raise ValueError(f"checkpoint step must be an integer in [0, 10**12), got {step!r}")


def _serialize_tensors(tensors: dict[str, torch.Tensor]) -> bytes:
    """safetensors bytes; tensors are moved to the CPU and cloned where they are views or share storage."""
    seen_storages: set[int] = set()
    ready = {}
    for name, tensor in tensors.items():
        if not isinstance(name, str) or not isinstance(tensor, torch.Tensor):
            raise TypeError(f"tensors must map str to torch.Tensor; {name!r} maps to {type(tensor).__name__} "
                            f"(use flatten_state to turn a nested state into tensors and metadata)")
        tensor = tensor.detach().cpu()
        storage = tensor.untyped_storage().data_ptr()
        if storage in seen_storages or not tensor.is_contiguous() or tensor.numel() * tensor.element_size() \
                != tensor.untyped_storage().nbytes():
            tensor = tensor.clone(memory_format=torch.contiguous_format)
        seen_storages.add(tensor.untyped_storage().data_ptr())
        ready[name] = tensor
    return safetensors.torch.save(ready)


def _serialize_metadata(metadata: dict) -> bytes:
    if not isinstance(metadata, dict):
        raise TypeError(f"metadata must be a dict, got {type(metadata).__name__}")
    try:
        return json.dumps(metadata, indent=1).encode("utf-8")
    except (TypeError, ValueError) as error:
        raise TypeError(f"checkpoint metadata must be JSON data (dicts, lists, str, numbers, bools, None): "
                        f"{error}; put tensors and arrays through flatten_state") from error


def _json_data(value: dict, what: str) -> dict:
    if not isinstance(value, dict):
        raise TypeError(f"{what} must be a dict, got {type(value).__name__}")
    try:
        json.dumps(value)
    except (TypeError, ValueError) as error:
        raise TypeError(f"{what} must be JSON data (dicts, lists, str, numbers, bools, None): {error}") from error
    return value


def _manifest(step: int, contents: dict[str, bytes], extra: dict | None = None) -> bytes:
    files = {name: {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()} for name, data in contents.items()}
    return json.dumps({"format_version": FORMAT_VERSION, "step": step, "files": files, **(extra or {})},
                      indent=1).encode("utf-8")


def _manifest_says_pinned(path: Path) -> bool:
    try:
        manifest = json.loads((path / MANIFEST_FILE).read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("pinned") is True


def _write_durably(path: Path, data: bytes) -> None:
    """Write all of ``data`` and fsync it before returning, so the manifest never describes unwritten bytes."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view[:_WRITE_CHUNK])
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _os_reason(error: OSError) -> str:
    if error.errno == errno.ENOSPC:
        return f"the disk is full ({error}); free space or point the checkpoint directory elsewhere"
    return str(error)


def _read_verified(path: Path) -> Checkpoint:
    """Read and check one checkpoint; CheckpointError says what is wrong with it."""
    manifest = _read_manifest(path)
    contents = {}
    for name in (TENSORS_FILE, META_FILE):
        expected = manifest["files"].get(name)
        if not isinstance(expected, dict):
            raise CheckpointError(f"{MANIFEST_FILE} does not list {name}")
        contents[name] = _read_checked_file(path / name, expected)
    try:
        tensors = safetensors.torch.load(contents[TENSORS_FILE])
        metadata = json.loads(contents[META_FILE])
    except Exception as error:  # verified bytes that still do not parse: written by something else
        raise CheckpointError(f"contents do not parse although the sums match: {error}") from error
    if isinstance(metadata, dict) and metadata.get("format") == _STATE_FORMAT:
        unflatten_state(tensors, metadata)  # a state that cannot be rebuilt is as unusable as a damaged file
    return Checkpoint(step=manifest["step"], path=path, tensors=tensors, metadata=metadata)


def _read_manifest(path: Path) -> dict:
    try:
        manifest = json.loads((path / MANIFEST_FILE).read_bytes())
    except FileNotFoundError:
        raise CheckpointError(f"{MANIFEST_FILE} is missing") from None
    except (OSError, ValueError) as error:
        raise CheckpointError(f"{MANIFEST_FILE} is unreadable ({error})") from error
    if not isinstance(manifest, dict) or manifest.get("format_version") != FORMAT_VERSION:
        version = manifest.get("format_version") if isinstance(manifest, dict) else None
        raise CheckpointError(f"{MANIFEST_FILE} has format version {version!r}, expected {FORMAT_VERSION}")
    match = _NAME.fullmatch(path.name)
    if match and manifest.get("step") != int(match.group(1)):
        raise CheckpointError(f"{MANIFEST_FILE} says step {manifest.get('step')!r}, the directory name says "
                              f"{int(match.group(1))}")
    if not isinstance(manifest.get("files"), dict):
        raise CheckpointError(f"{MANIFEST_FILE} has no file list")
    return manifest


def _read_checked_file(path: Path, expected: dict) -> bytes:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CheckpointError(f"{path.name} is missing") from None
    except OSError as error:
        raise CheckpointError(f"{path.name} is unreadable ({error})") from error
    if len(data) != expected.get("size"):
        raise CheckpointError(f"{path.name} is {len(data)} bytes, the manifest says {expected.get('size')} "
                              f"(truncated or overwritten)")
    if hashlib.sha256(data).hexdigest() != expected.get("sha256"):
        raise CheckpointError(f"{path.name} fails its sha256 check (corrupted)")
    return data


def _warn_loudly(message: str) -> None:
    logger.warning(message)
    warnings.warn(message, CheckpointFallbackWarning, stacklevel=3)


# -----------------------------------------------------------------------------------------------------------------
# Nested state <-> (tensors, JSON structure)

_STATE_FORMAT = "menger.state/1"


def flatten_state(state: dict) -> tuple[dict[str, torch.Tensor], dict]:
    """Split a nested state into tensors keyed by dotted path and a JSON-able description of the structure.

    Handles dicts (str or int keys), lists, tuples, torch tensors, numpy arrays and scalars, Python scalars of any
    size (e.g. numpy's 128-bit PCG64 state), strings and None; :func:`unflatten_state` rebuilds it bit for bit.
    """
    if not isinstance(state, dict):
        raise TypeError(f"flatten_state expects a dict, got {type(state).__name__}")
    tensors: dict[str, torch.Tensor] = {}
    root = _encode(state, [], tensors)
    return tensors, {"format": _STATE_FORMAT, "root": root}


def unflatten_state(tensors: dict[str, torch.Tensor], metadata: dict) -> dict:
    """Rebuild the nested state described by ``metadata`` (from :func:`flatten_state`) out of ``tensors``."""
    if not isinstance(metadata, dict) or metadata.get("format") != _STATE_FORMAT:
        found = metadata.get("format") if isinstance(metadata, dict) else type(metadata).__name__
        raise CheckpointError(f"state metadata has format {found!r}, expected {_STATE_FORMAT!r}; pass the "
                              f"structure returned by flatten_state")
    try:
        return _decode(metadata["root"], tensors)
    except CheckpointError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as error:  # hand-edited or written by something else
        raise CheckpointError(f"state metadata is malformed ({type(error).__name__}: {error})") from error


def _encode(value: Any, path: list[str], tensors: dict[str, torch.Tensor]) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, torch.Tensor):
        return {"kind": "tensor", "key": _store(tensors, path, value.detach())}
    if isinstance(value, (np.ndarray, np.generic)):
        return _encode_numpy(value, path, tensors)
    if isinstance(value, dict):
        return {"kind": "dict", "items": [[_check_key(key, path), _encode(item, [*path, str(key)], tensors)]
                                          for key, item in value.items()]}
    if isinstance(value, (list, tuple)):
        return {"kind": type(value).__name__,
                "items": [_encode(item, [*path, str(index)], tensors) for index, item in enumerate(value)]}
    raise TypeError(f"cannot checkpoint {'.'.join(path) or '<root>'} of type {type(value).__name__}; "
                    f"convert it to tensors, arrays, numbers, strings, lists or dicts first")


def _encode_numpy(value: np.ndarray | np.generic, path: list[str], tensors: dict[str, torch.Tensor]) -> dict:
    """Arrays travel as raw bytes so that every numpy dtype (including unsigned and byte order) survives exactly."""
    array = np.asarray(value)
    if array.dtype.hasobject or array.dtype.fields is not None:
        raise TypeError(f"cannot checkpoint {'.'.join(path)}: numpy dtype {array.dtype} holds Python objects or "
                        f"fields; store plain numeric arrays")
    raw = torch.from_numpy(np.frombuffer(np.ascontiguousarray(array).tobytes(), dtype=np.uint8).copy())
    return {"kind": "ndarray", "key": _store(tensors, path, raw), "dtype": array.dtype.str,
            "shape": list(array.shape), "scalar": isinstance(value, np.generic)}


def _check_key(key: Any, path: list[str]) -> str | int:
    if isinstance(key, str) or (isinstance(key, int) and not isinstance(key, bool)):
        return key
    raise TypeError(f"cannot checkpoint the dict at {'.'.join(path) or '<root>'}: key {key!r} is "
                    f"{type(key).__name__}; only str and int keys are supported")


def _store(tensors: dict[str, torch.Tensor], path: list[str], tensor: torch.Tensor) -> str:
    key = ".".join(path) or "<root>"
    unique, suffix = key, 1
    while unique in tensors:  # {"a.b": x, "a": {"b": y}} would otherwise collide
        unique, suffix = f"{key}#{suffix}", suffix + 1
    tensors[unique] = tensor
    return unique


def _decode(node: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if not isinstance(node, dict):
        return node
    kind = node.get("kind")
    if kind == "tensor":
        return _lookup(tensors, node["key"])
    if kind == "ndarray":
        dtype = np.dtype(node["dtype"])
        if dtype.hasobject or dtype.fields is not None:  # flatten_state never writes these: refuse, never build
            raise CheckpointError(f"state metadata asks for a numpy array of dtype {dtype}, which holds Python "
                                  f"objects or fields; flatten_state writes plain numeric arrays only")
        raw = _lookup(tensors, node["key"]).numpy().tobytes()
        array = np.frombuffer(raw, dtype=dtype).reshape(node["shape"]).copy()
        return array[()] if node["scalar"] else array
    if kind == "dict":
        return {key: _decode(item, tensors) for key, item in node["items"]}
    if kind in ("list", "tuple"):
        items = [_decode(item, tensors) for item in node["items"]]
        return items if kind == "list" else tuple(items)
    raise CheckpointError(f"state metadata has an entry of unknown kind {kind!r}; it was not written by "
                          f"flatten_state of this version")


def _lookup(tensors: dict[str, torch.Tensor], key: str) -> torch.Tensor:
    try:
        return tensors[key]
    except KeyError:
        raise CheckpointError(f"state metadata refers to tensor {key!r}, which the checkpoint does not hold") from None
