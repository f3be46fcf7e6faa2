"""Where a table's items live: one preallocated NumPy array per field, one row per item.

An item is any fixed-shape record, described by an item spec (field name -> (shape, dtype)). A CartPole transition::

    spec = {"obs": ((4,), np.float32), "action": ((), np.int64), "reward": ((), np.float32),
            "next_obs": ((4,), np.float32), "done": ((), np.bool_)}

an n-step transition adds ``"discount": ((), np.float32)``; a fixed-length R2D2 sequence is
``{"obs": ((80, 4), np.float32), ..., "state": ((2, 512), np.float32)}``. The table drives its storage by rows::

    arrays, count = storage.check_batch(items)      # validate and convert, outside the table's lock
    storage.write(rows, arrays)                     # the rows the table chose, under its lock (write_one: one)
    data = storage.read(rows)                       # copies, [len(rows), *shape] per field

**A shared-memory version replaces this class** by allocating the same arrays in shared memory (one block per
field, ``multiprocessing.shared_memory`` or torch's ``share_memory_``, as `menger.transport.shm` does for unroll
slots) and keeping the same three methods. Only keys and row indices then cross processes: an actor process
writes its items into rows it was granted, the table's process does the bookkeeping (trees, limiter, keys) on
those rows, and a learner process reads rows it was told. Nothing else in the table touches item data.
"""
from __future__ import annotations

import numpy as np

__all__ = ["ItemStorage", "normalize_spec"]


def normalize_spec(item_spec: dict) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """``{name: (shape, dtype)}`` with shapes as tuples of ints and dtypes as `numpy.dtype`, or a clear error."""
    if not isinstance(item_spec, dict) or not item_spec:
        raise ValueError("item_spec must be a non-empty dict of field name -> (shape, dtype), e.g. "
                         "{'obs': ((4,), np.float32), 'action': ((), np.int64)}")
    spec = {}
    for name, entry in item_spec.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"item_spec field names must be non-empty strings, got {name!r}")
        try:
            shape, dtype = entry
            shape = (int(shape),) if np.isscalar(shape) else tuple(int(d) for d in shape)
            dtype = np.dtype(dtype)
        except (TypeError, ValueError) as error:
            raise ValueError(f"item_spec[{name!r}] must be (shape, dtype), e.g. ((4,), np.float32), "
                             f"got {entry!r} ({error})") from None
        if any(d < 0 for d in shape):
            raise ValueError(f"item_spec[{name!r}] has a negative dimension: {shape}")
        if dtype.hasobject or dtype.fields is not None:
            raise ValueError(f"item_spec[{name!r}] has dtype {dtype}; fields must be plain numeric or bool arrays")
        spec[name] = (shape, dtype)
    return spec


class ItemStorage:
    """``rows`` preallocated rows of every field in ``spec`` (see `normalize_spec`)."""

    def __init__(self, spec: dict, rows: int):
        self.spec = normalize_spec(spec)
        self.rows = int(rows)
        self.arrays = {name: np.zeros((self.rows, *shape), dtype=dtype) for name, (shape, dtype) in self.spec.items()}
        self._castable: dict[tuple[str, np.dtype], bool] = {}

    @property
    def nbytes(self) -> int:
        return sum(array.nbytes for array in self.arrays.values())

    @property
    def row_nbytes(self) -> int:
        return sum(array[0].nbytes for array in self.arrays.values()) if self.rows else 0

    def check(self, item: dict) -> dict[str, np.ndarray]:
        """One item (field -> array of the spec's shape), validated."""
        arrays, _ = self._check(item, batch=False)
        return arrays

    def check_batch(self, items: dict) -> tuple[dict[str, np.ndarray], int]:
        """A batch of items (field -> array [count, *shape]) and the count."""
        return self._check(items, batch=True)

    def _check(self, items: dict, batch: bool) -> tuple[dict[str, np.ndarray], int]:
        if not isinstance(items, dict):
            raise TypeError(f"an item is a dict of field -> array, got {type(items).__name__}")
        if items.keys() != self.spec.keys():
            missing = [name for name in self.spec if name not in items]
            unexpected = [name for name in items if name not in self.spec]
            raise ValueError(f"item fields do not match the table's item_spec ({', '.join(self.spec)}): "
                             + "; ".join(part for part in (f"missing {missing}" if missing else "",
                                                           f"unexpected {unexpected}" if unexpected else "") if part))
        arrays, count = {}, None
        for name, (shape, dtype) in self.spec.items():
            array = np.asarray(items[name])
            if batch:
                if array.ndim == 0 or array.shape[1:] != shape:
                    raise ValueError(f"field {name!r} has shape {array.shape}; a batch needs [count, *{shape}]")
                if count is None:
                    count = array.shape[0]
                elif array.shape[0] != count:
                    raise ValueError(f"field {name!r} holds {array.shape[0]} items, the others {count}")
            else:
                if array.shape != shape:
                    raise ValueError(f"field {name!r} has shape {array.shape}, the item_spec says {shape}")
            self._check_dtype(name, array.dtype, dtype)
            arrays[name] = array
        return arrays, (count if batch else 1)

    def _check_dtype(self, name: str, given: np.dtype, wanted: np.dtype) -> None:
        key = (name, given)
        if key not in self._castable:
            self._castable[key] = given == wanted or np.can_cast(given, wanted, casting="same_kind")
        if not self._castable[key]:
            raise ValueError(f"field {name!r} is {given}, which the item_spec's {wanted} cannot hold without "
                             f"changing its kind; cast it first (e.g. .astype(np.{wanted.name}))")

    def write(self, rows, arrays: dict[str, np.ndarray]) -> None:
        """Copy a batch into ``rows`` (an index array or a slice)."""
        for name, array in arrays.items():
            self.arrays[name][rows] = array

    def write_one(self, row: int, arrays: dict[str, np.ndarray]) -> None:
        """Copy one item (unbatched arrays) into ``row``."""
        for name, array in arrays.items():
            self.arrays[name][row] = array

    def read(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        return {name: array[rows] for name, array in self.arrays.items()}

    def spec_state(self) -> dict:
        return {name: [list(shape), dtype.str] for name, (shape, dtype) in self.spec.items()}
