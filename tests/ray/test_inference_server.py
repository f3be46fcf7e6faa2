"""Central inference's request server on its own (real sockets; actors are threads running `RayCentralActions`):
the dynamic batch, its deadlines, the secret, and frames that are never unpickled. No Ray instance is needed.
"""
from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pytest
import torch

pytest.importorskip("ray")

from menger.inference.ray import (  # noqa: E402
    RayCentralActions, RequestServer, _LENGTH, decode_frame, encode_frame, read_frame)

B = 4


def _ask(server: RequestServer, how_many: int, timeout_s: float = 30.0) -> tuple[list[threading.Thread], list]:
    """`how_many` actors (threads), each asking once with its index as observation; their replies (or errors)."""
    results: list = []

    def request(index: int) -> None:
        client = RayCentralActions(server.address, server.secret, params=None, timeout_s=timeout_s)
        try:
            results.append(client.act(torch.full((B, 2), float(index)), None))
        except Exception as exc:  # noqa: BLE001 - the test reads it
            results.append(exc)

    threads = [threading.Thread(target=request, args=(i,), daemon=True) for i in range(how_many)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 30.0
    while len(server.ready) < how_many:
        assert time.monotonic() < deadline, f"only {len(server.ready)} of {how_many} requests arrived in 30 s"
        server._poll(0.01)
    return threads, results


def _answer_all(server: RequestServer, taken: list) -> None:
    server.answer([(conn, obs[:, 0].astype(np.int64), np.zeros(B, np.float32), None) for conn, obs, _, _ in taken])


@pytest.fixture
def server():
    server = RequestServer("127.0.0.1")
    yield server
    server.close("the test ended")


def test_a_batch_is_capped_and_a_full_one_goes_at_once(server):
    threads, results = _ask(server, 5)
    began = time.monotonic()
    sizes = []
    for _ in range(2):
        taken = server.take(max_requests=2, timeout_s=5.0, wait_s=1.0)
        sizes.append(len(taken))
        _answer_all(server, taken)
    assert time.monotonic() - began < 2.0  # full batches never wait out the 5 s timeout
    sizes.append(len(server.take(max_requests=2, timeout_s=0.1, wait_s=1.0)))
    assert sizes == [2, 2, 1]


def test_each_request_gets_its_own_answer_first_come_first_served(server):
    threads, results = _ask(server, 3)
    order = [int(frame["obs"][0, 0]) for _, frame, _ in server.ready]
    taken = server.take(max_requests=8, timeout_s=0.05, wait_s=1.0)
    assert [int(obs[0, 0]) for _, obs, _, _ in taken] == order  # in the order they arrived
    assert all(waited >= 0.0 for *_, waited in taken)
    _answer_all(server, taken)
    for thread in threads:
        thread.join(5.0)
    assert sorted(int(out.action[0]) for out in results) == sorted(order)
    assert all(torch.equal(out.action, torch.full((B,), out.action[0])) for out in results)  # its own obs' answer


def test_a_partial_batch_goes_after_the_timeout_and_an_empty_take_after_wait_s(server):
    began = time.monotonic()
    assert server.take(max_requests=4, timeout_s=1.0, wait_s=0.1) == []
    assert 0.1 <= time.monotonic() - began < 0.9
    _ask(server, 1)
    began = time.monotonic()
    assert len(server.take(max_requests=4, timeout_s=0.2, wait_s=1.0)) == 1
    assert 0.2 <= time.monotonic() - began < 0.9


def test_closing_fails_every_waiting_request_and_refuses_new_ones(server):
    threads, results = _ask(server, 2)
    server.take(max_requests=1, timeout_s=0.0, wait_s=1.0)  # one taken, one still pending: both must fail
    server.close("the learner stopped")
    for thread in threads:
        thread.join(5.0)
    assert len(results) == 2 and all(isinstance(r, RuntimeError) and "the learner stopped" in str(r) for r in results)
    with pytest.raises(ConnectionError, match="cannot reach the learner's central inference"):
        RayCentralActions(server.address, server.secret, params=None).act(torch.zeros(B, 2), None)


def test_an_unanswered_request_times_out_with_a_reason(server, monkeypatch):
    monkeypatch.setattr("menger.inference.ray.CONTROL_TIMEOUT_S", 0.1)  # nobody serves: 0.3 s in all
    client = RayCentralActions(server.address, server.secret, params=None, timeout_s=0.2)
    with pytest.raises(TimeoutError, match="no answer from the learner's central inference"):
        client.act(torch.zeros(B, 2), None)


def test_a_connection_without_the_secret_is_closed_unread(server):
    with socket.create_connection(server.address, timeout=5.0) as intruder:
        intruder.sendall(bytes(len(server.secret)) + encode_frame({"obs": np.zeros((B, 2), np.float32)}))
        deadline = time.monotonic() + 10.0
        while server.refused == 0:
            assert time.monotonic() < deadline, "the connection without the secret was not refused"
            server._poll(0.01)
        try:
            assert intruder.recv(1) == b""  # closed
        except ConnectionResetError:
            pass  # closed with its request unread: the peer's kernel resets the connection
    assert not server.ready


def test_frames_carry_numeric_arrays_only():
    arrays = {"obs.image": np.arange(12, dtype=np.uint8).reshape(3, 4), "state": np.ones((2, 3, 5), np.float32),
              "scalar": np.array(3, np.int64)}
    frame = encode_frame(arrays)
    decoded = decode_frame(frame[_LENGTH.size:])
    assert decoded.keys() == arrays.keys() and all(np.array_equal(decoded[k], arrays[k]) for k in arrays)
    assert decoded["obs.image"].dtype == np.uint8 and decoded["state"].flags.writeable
    with pytest.raises(TypeError, match="numbers only"):
        encode_frame({"obs": np.array([{"payload": 1}], dtype=object)})
    body = bytearray(frame[_LENGTH.size:])
    forged = body.replace(b"|u1", b"|O8", 1)  # a peer claiming an object array gets nothing decoded
    with pytest.raises(ValueError):
        decode_frame(bytes(forged))
    with pytest.raises(ValueError):
        decode_frame(bytes(body[:-3]))  # shorter than it claims
    left, right = socket.socketpair()
    with left, right:
        left.sendall(frame)
        assert np.array_equal(read_frame(right)["state"], arrays["state"])


class _Offered:
    """The actor's parameter source as central inference leaves it: only the version offered with the unroll."""

    def __init__(self, offered: int):
        self.offered = offered

    def version(self) -> int:
        return self.offered


def test_a_reply_says_which_version_acted_and_the_unroll_is_tagged_with_the_newer(server):
    """Central actors ask no cache: each reply carries the version the driver acted with, and the unroll's tag
    is the newer of it and the version offered with the unroll call."""
    client = RayCentralActions(server.address, server.secret, params=_Offered(3), timeout_s=30.0)
    assert client.refresh() == 3  # nothing answered yet: the offered version
    for answered_with, expected in ((7, 7), (5, 7)):  # never older than a version already seen
        results: list = []
        thread = threading.Thread(target=lambda: results.append(client.act(torch.zeros((B, 2)), None)), daemon=True)
        thread.start()
        taken = server.take(max_requests=1, timeout_s=5.0, wait_s=30.0)
        server.answer([(conn, np.zeros(B, np.int64), np.zeros(B, np.float32), None) for conn, _, _, _ in taken],
                      answered_with)
        thread.join(30.0)
        assert not isinstance(results[0], Exception) and client.refresh() == expected
    client.close()
