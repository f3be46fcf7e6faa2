"""Rate limiters: when a table lets an insert or a sample through. One primitive, with Reverb's semantics.

The table asks its limiter before every insert and every sample, and tells it what happened, under its lock::

    while limiter.admissible_inserts(len(items)) == 0: wait     # Table.insert_batch: the actors' side
    ...store those items...; limiter.record_inserts(n); limiter.record_deletes(evicted)
    while not limiter.can_sample(batch_size): wait                # Table.sample: the learner's side
    ...select the batch...; limiter.record_samples(batch_size); limiter.record_deletes(used_up)

The rule is Reverb's ``RateLimiter::CanInsert`` / ``CanSample`` (reverb/cc/rate_limiter.cc). With
``size = inserts - deletes`` and ``diff = inserts * samples_per_insert - samples``:

* an insert of ``n`` passes while ``size + n <= min_size_to_sample`` (filling up to the minimum is free), and
  otherwise while ``(inserts + n) * samples_per_insert - samples <= max_diff``;
* a sample of ``n`` blocks while ``size < min_size_to_sample``, and otherwise passes while
  ``diff - n >= min_diff``.

Reverb's documentation calls ``error = (inserts - min_size_to_sample) * samples_per_insert - samples`` the error;
it is ``diff`` less the constant ``min_size_to_sample * samples_per_insert``, which is why `SampleToInsertRatio`
centres its window ``[min_diff, max_diff]`` on that constant: the error then stays within ``±error_buffer``. The
window itself is compared with ``diff``, as Reverb's code does; that is what makes `Queue(n)` = ``(1, 1, 0, n)``
hold exactly ``n`` items.

**Deadlocks are refused when the limiter is built.** An insert moves ``diff`` up by ``samples_per_insert``, a
sample down by one, so a window narrower than one step of each can leave both sides blocked at once. Every
limiter here applies Reverb's rule (reverb/rate_limiters.py, ``SampleToInsertRatio.__init__``: "The size of
error_buffer must be >= 2 * max(1.0, samples_per_insert) as smaller values could completely block samples
and/or insert calls"): ``max_diff - min_diff >= 2 * max(1, samples_per_insert)``. That is sufficient for one
insert against one sample; a learner that samples whole batches needs a wider window: `deadlocks` tells,
`Table.sample` refuses such a batch size before it waits (`check_sample_batch`), naming the largest safe one.

**Restoring (Reverb issue #103).** A Reverb server restored from a checkpoint took the checkpoint's limiter in
place of the one the code built, and inserts blocked forever. Here the limiter is always the one the code built:
`restore` takes the saved counters only if they were counted against the same parameters, and re-derives
``deletes`` from the number of items the table actually restored, so that the limiter's size is the table's. The
blocking decisions after a restore are then the ones the saved table would have made (an exact resume), and never
both blocked: if inserts are blocked, ``diff > max_diff - spi >= min_diff + 1`` by the window rule, so a sample
passes. Counters saved under other parameters are rebased for this limiter: the restored items count as its
inserts, and its samples are set so that ``diff`` starts at ``max_diff`` at most (the learner is owed no samples
beyond the window).
"""
from __future__ import annotations

import logging
import math
import sys

__all__ = ["MinSize", "Queue", "RateLimiter", "SampleToInsertRatio"]

logger = logging.getLogger(__name__)

_UNBOUNDED = sys.float_info.max


class RateLimiter:
    """``(samples_per_insert, min_size_to_sample, min_diff, max_diff)`` and the counters they are compared with.

    Counters: ``inserts`` (items the table accepted, including any it evicted at once), ``samples`` (items it
    handed out, one per batch element) and ``deletes`` (items it removed: evicted, or sampled
    ``max_times_sampled`` times). The table records them; nothing else should.
    """

    def __init__(self, samples_per_insert: float, min_size_to_sample: int, min_diff: float, max_diff: float):
        samples_per_insert, min_diff, max_diff = float(samples_per_insert), float(min_diff), float(max_diff)
        if not (math.isfinite(samples_per_insert) and samples_per_insert > 0):
            raise ValueError(f"samples_per_insert must be a finite number > 0, got {samples_per_insert}")
        if isinstance(min_size_to_sample, bool) or int(min_size_to_sample) != min_size_to_sample \
                or min_size_to_sample < 1:
            raise ValueError(f"min_size_to_sample ({min_size_to_sample}) must be a positive integer")
        if math.isnan(min_diff) or math.isnan(max_diff) or min_diff >= max_diff:
            raise ValueError(f"the window [min_diff, max_diff] = [{min_diff:g}, {max_diff:g}] must have "
                             f"min_diff < max_diff")
        # Reverb's deadlock rule, reverb/rate_limiters.py (SampleToInsertRatio.__init__):
        #   if max_diff - min_diff < 2 * max(1.0, samples_per_insert): raise ValueError(...)
        # An insert moves diff by +samples_per_insert and a sample by -1; a window at least two steps of the larger
        # wide always leaves one of them admitted.
        needed = 2 * max(1.0, samples_per_insert)
        if max_diff - min_diff < needed:
            raise ValueError(
                f"rate limiter window [min_diff, max_diff] = [{min_diff:g}, {max_diff:g}] is "
                f"{max_diff - min_diff:g} wide, narrower than 2 * max(1, samples_per_insert={samples_per_insert:g}) "
                f"= {needed:g} (Reverb's rule): an insert moves the error by samples_per_insert and a sample by 1, "
                f"so a narrower window can block inserts and samples at once, forever. Widen it to at least "
                f"{needed:g} (SampleToInsertRatio: error_buffer >= {needed / 2:g})")
        self.samples_per_insert = samples_per_insert
        self.min_size_to_sample = int(min_size_to_sample)
        self.min_diff = min_diff
        self.max_diff = max_diff
        self.inserts = 0
        self.samples = 0
        self.deletes = 0
        self._owner: str | None = None

    # ----- the rule ---------------------------------------------------------------------------------------------
    @property
    def size(self) -> int:
        """Items in the table, as the limiter counts them."""
        return self.inserts - self.deletes

    @property
    def diff(self) -> float:
        """``inserts * samples_per_insert - samples``: what the window ``[min_diff, max_diff]`` bounds."""
        return self.inserts * self.samples_per_insert - self.samples

    @property
    def error(self) -> float:
        """Reverb's documented error, ``(inserts - min_size_to_sample) * samples_per_insert - samples``."""
        return self.diff - self.min_size_to_sample * self.samples_per_insert

    def can_insert(self, n: int = 1) -> bool:
        """Would an insert of ``n`` items pass now (Reverb's CanInsert)?"""
        _check_count(n)
        if self.inserts + n - self.deletes <= self.min_size_to_sample:
            return True
        return (self.inserts + n) * self.samples_per_insert - self.samples <= self.max_diff

    def can_sample(self, n: int = 1) -> bool:
        """Would a sample of ``n`` items pass now (Reverb's CanSample)?"""
        _check_count(n)
        if self.inserts - self.deletes < self.min_size_to_sample:
            return False
        return self.inserts * self.samples_per_insert - self.samples - n >= self.min_diff

    def admissible_inserts(self, limit: int) -> int:
        """How many of ``limit`` items, inserted one after another, would pass now (0 if none)."""
        if limit <= 0:
            return 0
        free = max(0, self.min_size_to_sample - self.size)
        if free >= limit or self.can_insert(limit):
            return limit
        # The largest j with (inserts + j) * spi - samples <= max_diff, corrected for rounding on the exact test.
        j = int(min(limit, max(0.0, math.floor((self.max_diff + self.samples) / self.samples_per_insert)
                                - self.inserts)))
        while j < limit and self._ratio_admits(j + 1):
            j += 1
        while j > 0 and not self._ratio_admits(j):
            j -= 1
        return max(free, j)

    def _ratio_admits(self, n: int) -> bool:
        return (self.inserts + n) * self.samples_per_insert - self.samples <= self.max_diff

    def largest_sample_batch(self) -> int | None:
        """The largest ``n`` such that every batch size up to ``n`` is admitted eventually (None: any size).

        A batch of ``n`` waits while ``diff - n < min_diff``; inserts stop once ``diff + spi > max_diff``. If some
        reachable ``diff`` lies strictly between ``max_diff - spi`` and ``min_diff + n``, both sides wait for
        each other forever. With an integer ``samples_per_insert`` every ``diff`` is an integer, so batches are
        safe while ``floor(max_diff - spi) + 1 >= min_diff + n`` (so `Queue(n)` serves batches of ``n``); otherwise
        the continuous bound ``n <= max_diff - spi - min_diff`` is used, which can be one short.
        """
        if self.max_diff - self.min_diff >= _UNBOUNDED:
            return None
        spi = self.samples_per_insert
        if spi.is_integer():
            return int(math.floor(math.floor(self.max_diff - spi) + 1 - self.min_diff))
        return int(math.floor(self.max_diff - spi - self.min_diff))

    def deadlocks(self, batch_size: int) -> bool:
        """Could a learner sampling batches of ``batch_size`` and actors inserting one at a time block both?

        With an integer ``samples_per_insert`` s and batches of n, ``diff = inserts * s - samples`` only takes
        multiples of g = gcd(s, n), so the test is whether a multiple of g lies strictly between
        ``max_diff - s`` and ``min_diff + n`` (exact wherever the limiter can reach every such multiple, which the
        tests check by search). Otherwise the continuous bound of `largest_sample_batch` is used.
        """
        _check_count(batch_size)
        if self.max_diff - self.min_diff >= _UNBOUNDED:
            return False
        spi = self.samples_per_insert
        if not spi.is_integer():
            return batch_size > self.largest_sample_batch()
        step = math.gcd(int(spi), int(batch_size))
        first_above = step * (math.floor((self.max_diff - spi) / step) + 1)
        return first_above < self.min_diff + batch_size

    def check_sample_batch(self, batch_size: int) -> None:
        """Refuse a batch size that could wait forever with inserts blocked, naming the numbers and the fix."""
        if self.deadlocks(batch_size):
            spi, largest = self.samples_per_insert, max(self.largest_sample_batch(), 0)
            raise ValueError(
                f"a sample of {batch_size} items can deadlock under {self!r}: inserts stop once "
                f"inserts * {spi:g} - samples exceeds {self.max_diff - spi:g}, and a batch of {batch_size} needs it "
                f"at {self.min_diff + batch_size:g} or more, so the learner and the actors can wait for each other "
                f"forever. Sample at most {largest} items at a time, or widen the window by "
                f"{batch_size - largest} (SampleToInsertRatio: error_buffer >= "
                f"{(self.max_diff - self.min_diff + batch_size - largest) / 2:g})")

    # ----- what happened ----------------------------------------------------------------------------------------
    def record_inserts(self, n: int) -> None:
        self.inserts += int(n)

    def record_samples(self, n: int) -> None:
        self.samples += int(n)

    def record_deletes(self, n: int) -> None:
        self.deletes += int(n)

    # ----- for messages -----------------------------------------------------------------------------------------
    def counters(self) -> dict:
        return {"inserts": self.inserts, "samples": self.samples, "deletes": self.deletes, "size": self.size,
                "diff": self.diff, "error": self.error}

    def describe(self) -> str:
        return (f"{self!r} with inserts={self.inserts}, samples={self.samples}, deletes={self.deletes} "
                f"(size {self.size}, diff = inserts * {self.samples_per_insert:g} - samples = {self.diff:g}, "
                f"window [{_fmt(self.min_diff)}, {_fmt(self.max_diff)}])")

    def insert_blocked_reason(self) -> str:
        return (f"inserts wait for samples: after one more insert, inserts * {self.samples_per_insert:g} - samples "
                f"would be {self.diff + self.samples_per_insert:g} > max_diff {self.max_diff:g}")

    def sample_blocked_reason(self, n: int) -> str:
        if self.size < self.min_size_to_sample:
            return (f"the table holds {self.size} items, fewer than min_size_to_sample={self.min_size_to_sample}: "
                    f"it needs {self.min_size_to_sample - self.size} more insert(s)")
        return (f"samples wait for inserts: after a batch of {n}, inserts * {self.samples_per_insert:g} - samples "
                f"would be {self.diff - n:g} < min_diff {self.min_diff:g}")

    def __repr__(self) -> str:
        return (f"RateLimiter(samples_per_insert={self.samples_per_insert:g}, "
                f"min_size_to_sample={self.min_size_to_sample}, min_diff={_fmt(self.min_diff)}, "
                f"max_diff={_fmt(self.max_diff)})")

    # ----- ownership and checkpoints ----------------------------------------------------------------------------
    @property
    def params(self) -> tuple[float, int, float, float]:
        return self.samples_per_insert, self.min_size_to_sample, self.min_diff, self.max_diff

    def claim(self, table_name: str) -> None:
        """Bind this limiter to one table (its counters describe that table's items only)."""
        if self._owner is not None:
            raise ValueError(f"this {self!r} already limits table {self._owner!r}; build one limiter per table")
        self._owner = table_name

    def state(self) -> dict:
        return {"samples_per_insert": self.samples_per_insert, "min_size_to_sample": self.min_size_to_sample,
                "min_diff": self.min_diff, "max_diff": self.max_diff,
                "inserts": self.inserts, "samples": self.samples, "deletes": self.deletes}

    @classmethod
    def from_state(cls, state: dict, size: int | None = None) -> "RateLimiter":
        """The saved limiter, parameters and counters; with ``size``, its deletes re-derived to hold ``size``."""
        limiter = RateLimiter(state["samples_per_insert"], state["min_size_to_sample"], state["min_diff"],
                              state["max_diff"])
        limiter._set_counters(state, size)
        return limiter

    def restore(self, state: dict, size: int) -> bool:
        """Take saved counters for a table that now holds ``size`` items; True if they were taken as saved.

        Same parameters: inserts and samples as saved, deletes = inserts - size. Other parameters (the code's
        limiter changed since the checkpoint): rebased, see the module's docstring; returns False.
        """
        saved = (float(state["samples_per_insert"]), int(state["min_size_to_sample"]), float(state["min_diff"]),
                 float(state["max_diff"]))
        if saved == self.params:
            self._set_counters(state, size)
            return True
        self.inserts, self.deletes = int(size), 0
        self.samples = max(0, math.ceil(size * self.samples_per_insert - self.max_diff))
        return False

    def _set_counters(self, state: dict, size: int | None) -> None:
        inserts, samples, deletes = int(state["inserts"]), int(state["samples"]), int(state["deletes"])
        if min(inserts, samples, deletes) < 0:
            raise ValueError(f"rate limiter counters must be >= 0, got inserts={inserts}, samples={samples}, "
                             f"deletes={deletes}")
        if size is not None:
            if size > inserts:
                raise ValueError(f"a table of {size} items cannot come from a limiter that counted only "
                                 f"{inserts} inserts; the checkpoint's items and counters do not belong together")
            deletes = inserts - int(size)
        self.inserts, self.samples, self.deletes = inserts, samples, deletes


class MinSize(RateLimiter):
    """Samples block until the table holds ``min_size_to_sample`` items; nothing else ever blocks."""

    def __init__(self, min_size_to_sample: int):
        super().__init__(1.0, min_size_to_sample, -_UNBOUNDED, _UNBOUNDED)

    def __repr__(self) -> str:
        return f"MinSize({self.min_size_to_sample})"


class SampleToInsertRatio(RateLimiter):
    """Each item is sampled ``samples_per_insert`` times on average, within ``error_buffer`` (Reverb's).

    Below ``min_size_to_sample`` items it is `MinSize`. Above, inserts block when the actors run more than
    ``error_buffer`` samples ahead of ``samples_per_insert`` per insert, and samples when the learner does:
    the window is ``min_size_to_sample * samples_per_insert ± error_buffer``. A ``(min_diff, max_diff)`` pair
    is used as it is, without the offset.
    """

    def __init__(self, samples_per_insert: float, min_size_to_sample: int,
                 error_buffer: float | tuple[float, float]):
        self.error_buffer = error_buffer
        if isinstance(error_buffer, (tuple, list)):
            min_diff, max_diff = (float(x) for x in error_buffer)
        else:
            offset = float(samples_per_insert) * min_size_to_sample
            min_diff, max_diff = offset - float(error_buffer), offset + float(error_buffer)
        super().__init__(samples_per_insert, min_size_to_sample, min_diff, max_diff)
        # Reverb's two further checks on the window's position (reverb/rate_limiters.py).
        start = self.samples_per_insert * self.min_size_to_sample
        if self.min_diff > start:
            raise ValueError(
                f"the window [{self.min_diff:g}, {self.max_diff:g}] lies above min_size_to_sample * "
                f"samples_per_insert = {start:g}: samples would block as soon as min_size_to_sample items are in. "
                f"Centre it on {start:g} (pass error_buffer as one number)")
        if self.max_diff < start:
            logger.warning("the window [%g, %g] lies below min_size_to_sample * samples_per_insert = %g: inserts "
                           "block as soon as min_size_to_sample items are in, until the learner samples; a single "
                           "thread that inserts and samples in turn would deadlock", self.min_diff, self.max_diff,
                           start)

    def __repr__(self) -> str:
        return (f"SampleToInsertRatio(samples_per_insert={self.samples_per_insert:g}, "
                f"min_size_to_sample={self.min_size_to_sample}, error_buffer={self.error_buffer!r})")


class Queue(RateLimiter):
    """A queue of ``size`` items: inserts block when it is full, samples when it is empty.

    Use it as `Table.queue` does: fifo sampler and remover, ``max_times_sampled=1``. Reverb's window rule needs
    ``size >= 2`` (a window of 1 is narrower than 2 * max(1, 1)).
    """

    def __init__(self, size: int):
        if isinstance(size, bool) or int(size) != size or size < 2:
            raise ValueError(f"Queue({size}): a queue holds at least 2 items (its window [0, size] must be at least "
                             f"2 * max(1, samples_per_insert=1) = 2 wide, Reverb's deadlock rule)")
        super().__init__(1.0, 1, 0.0, float(size))

    def __repr__(self) -> str:
        return f"Queue({self.max_diff:g})"


def _check_count(n: int) -> None:
    if n < 1:
        raise ValueError(f"a count of items must be >= 1, got {n}")


def _fmt(x: float) -> str:
    return "-inf" if x <= -_UNBOUNDED else "inf" if x >= _UNBOUNDED else f"{x:g}"
