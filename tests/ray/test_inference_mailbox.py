"""The central-inference mailbox on its own (a plain object, threads as callers): the dynamic batch and its deadlines.

On Ray it is a threaded actor; here each caller is a thread, which is what `max_concurrency` gives it there.
"""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

pytest.importorskip("ray")

from menger.inference.ray import InferenceMailbox  # noqa: E402

B = 4


def _ask(mailbox: InferenceMailbox, how_many: int) -> tuple[list[threading.Thread], list]:
    """`how_many` requests from threads, each with its index as observation; their replies (or errors) collected."""
    results: list = []

    def request(index: int) -> None:
        try:
            results.append(mailbox.act(np.full((B, 2), index, np.float32), None))
        except Exception as exc:  # noqa: BLE001 - the test reads it
            results.append(exc)

    threads = [threading.Thread(target=request, args=(i,), daemon=True) for i in range(how_many)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 30.0
    while len(mailbox._pending) < how_many:
        assert time.monotonic() < deadline, f"only {len(mailbox._pending)} of {how_many} requests arrived in 30 s"
        time.sleep(0.001)
    return threads, results


def _answer_all(mailbox: InferenceMailbox, taken: list) -> None:
    mailbox.answer([(request_id, obs[:, 0].astype(np.int64), np.zeros(B, np.float32), None)
                    for request_id, obs, _, _ in taken])


def test_a_batch_is_capped_and_a_full_one_goes_at_once():
    mailbox = InferenceMailbox()
    _ask(mailbox, 5)
    began = time.monotonic()
    sizes = []
    for _ in range(2):
        taken = mailbox.take(max_requests=2, timeout_s=5.0, wait_s=1.0)
        sizes.append(len(taken))
        _answer_all(mailbox, taken)
    assert time.monotonic() - began < 2.0  # full batches never wait out the 5 s timeout
    sizes.append(len(mailbox.take(max_requests=2, timeout_s=0.1, wait_s=1.0)))
    assert sizes == [2, 2, 1]


def test_each_request_gets_its_own_answer_first_come_first_served():
    mailbox = InferenceMailbox()
    threads, results = _ask(mailbox, 3)
    taken = mailbox.take(max_requests=8, timeout_s=0.05, wait_s=1.0)
    assert [request_id for request_id, *_ in taken] == [0, 1, 2]
    assert all(waited >= 0.0 for *_, waited in taken)
    _answer_all(mailbox, taken)
    for thread in threads:
        thread.join(2.0)
    sent = sorted(int(obs[0, 0]) for _, obs, _, _ in taken)
    assert sorted(int(action[0]) for action, _, _ in results) == sent  # each thread got the answer to its own obs


def test_a_partial_batch_goes_after_the_timeout_and_an_empty_take_after_wait_s():
    mailbox = InferenceMailbox()
    began = time.monotonic()
    assert mailbox.take(max_requests=4, timeout_s=1.0, wait_s=0.1) == []
    assert 0.1 <= time.monotonic() - began < 0.9
    _ask(mailbox, 1)
    began = time.monotonic()
    assert len(mailbox.take(max_requests=4, timeout_s=0.2, wait_s=1.0)) == 1
    assert 0.2 <= time.monotonic() - began < 0.9


def test_closing_fails_every_waiting_request_and_refuses_new_ones():
    mailbox = InferenceMailbox()
    threads, results = _ask(mailbox, 2)
    mailbox.take(max_requests=1, timeout_s=0.0, wait_s=1.0)  # one taken, one still pending: both must fail
    mailbox.close("the learner stopped")
    for thread in threads:
        thread.join(2.0)
    assert len(results) == 2 and all(isinstance(r, RuntimeError) and "the learner stopped" in str(r) for r in results)
    with pytest.raises(RuntimeError, match="has stopped"):
        mailbox.act(np.zeros((B, 2), np.float32), None)


def test_an_unanswered_request_times_out_with_a_reason():
    mailbox = InferenceMailbox(reply_timeout_s=0.2)
    with pytest.raises(TimeoutError, match="no answer from the learner's inference thread"):
        mailbox.act(np.zeros((B, 2), np.float32), None)
    assert mailbox.take(max_requests=1, timeout_s=0.0, wait_s=0.0) == []  # the expired request was withdrawn
