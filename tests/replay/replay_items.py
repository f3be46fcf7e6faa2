"""Shared pieces of the replay tests: a CartPole-sized item spec and batches of items that say which they are."""
import numpy as np

SPEC = {"obs": ((4,), np.float32), "action": ((), np.int64), "reward": ((), np.float32),
        "next_obs": ((4,), np.float32), "done": ((), np.bool_)}


def make_items(count: int, start: int = 0) -> dict:
    """``count`` transitions; item i's action is ``start + i`` and its obs are that number, so data names items."""
    ids = np.arange(start, start + count)
    obs = np.repeat(ids[:, None], 4, axis=1).astype(np.float32)
    return {"obs": obs, "action": ids.astype(np.int64), "reward": ids.astype(np.float32), "next_obs": obs + 1,
            "done": ids % 7 == 0}


def one_item(i: int) -> dict:
    return {name: value[0] for name, value in make_items(1, i).items()}
