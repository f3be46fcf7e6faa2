"""Metrics as JSON lines: the run's durable record, read back by ``menger plot`` and resume.

One object per line, ``{"step": ..., **metrics}``, flushed on every write so a crash loses at most the
line being written. NaN and infinities become ``null`` (strict JSON, which every reader accepts).
Reopening the file appends, so a resumed run continues the same record.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from pathlib import Path
from typing import IO, Mapping


class JsonlLogger:
    """Appends one JSON object per ``write`` to ``path`` (parent folders are created)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _repair_partial_last_line(self.path)
        self._file: IO[str] | None = self.path.open("a", encoding="utf-8")

    def write(self, metrics: Mapping[str, float], step: int) -> None:
        if self._file is None:
            raise ValueError(f"JsonlLogger for {self.path} is closed; create a new one to keep writing.")
        self._file.write(encode_record(metrics, step) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> "JsonlLogger":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def encode_record(metrics: Mapping[str, float], step: int) -> str:
    """One JSON line. ``step`` is authoritative: a ``"step"`` key inside ``metrics`` is ignored."""
    record: dict[str, object] = {"step": int(step)}
    for key, value in metrics.items():
        if key != "step":
            record[key] = _json_number(key, value)
    return json.dumps(record, allow_nan=False, separators=(",", ":"))


def _json_number(key: str, value: object) -> int | float | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise TypeError(
            f"metric {key!r} has value {value!r} of type {type(value).__name__}; "
            "loggers take numbers only (log text elsewhere, or convert it to a number)"
        ) from None
    return number if math.isfinite(number) else None


def read_jsonl(path: str | os.PathLike[str]) -> list[dict]:
    """All records of a metrics file, oldest first.

    A last line cut short by a crash mid-write is skipped. A malformed line anywhere else means the file
    was damaged some other way, and raises with its line number rather than silently losing data.
    """
    path = Path(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as error:
            if number == len(lines):
                break
            raise ValueError(
                f"{path}:{number} is not valid JSON ({error.msg}); only the last line may be cut short "
                "by a crash. Remove or fix that line to read the rest."
            ) from None
    return records


def _repair_partial_last_line(path: Path) -> None:
    """Make an appended run start on a fresh line after a crash mid-write.

    A complete last record that only lacks its newline gets one; a truncated fragment is cut off (it
    holds no recoverable record), so the file stays valid JSON lines for every reader.
    """
    if not path.exists() or path.stat().st_size == 0:
        return
    with path.open("rb+") as file:
        data = file.read()
        if data.endswith(b"\n"):
            return
        start = data.rfind(b"\n") + 1
        fragment = data[start:]
        try:
            json.loads(fragment)
        except ValueError:
            file.truncate(start)
            warnings.warn(
                f"{path} ended with a partial record ({len(fragment)} bytes, from an interrupted write); "
                "removed it before appending.",
                RuntimeWarning,
                stacklevel=3,
            )
        else:
            file.seek(0, os.SEEK_END)
            file.write(b"\n")
