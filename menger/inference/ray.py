"""Central inference (SEED RL) for the ray launcher: actors on any node, one batched forward in the learner's process.

An actor asks for actions at every step, so the hop to the learner is on the critical path of every env step. A
Ray call per request (an actor method) costs about 1 ms each way on a loaded machine, and a request took four of
them (actor -> a mailbox actor -> the driver's long poll -> answer -> reply): central inference ran 7x slower
than local. So each actor keeps a plain socket to the driver, where the inference thread itself reads them::

    actor (any node):  RayCentralActions.act(obs, state) -> a request frame on its socket; waits for the reply
    server.take(cap, timeout)       the driver's inference thread, on a selector over every actor's socket: the
                                    first request, then more until `cap` requests are in or `timeout` has passed
                                    (the dynamic batch, across actors)
    driver (the learner's device):  newest published parameters (the parameter server's `latest()`, when the
                                    version moved) -> one forward over every taken request's B envs
    server.answer(replies)          a reply frame on each request's socket

Frames hold only numeric arrays (name, dtype, shape, bytes; an object dtype is refused), so nothing on the socket
is ever unpickled. A connection counts only after it presents the service's secret (32 random bytes,
handed to actors inside their Ray constructor arguments, that is over Ray's authenticated channel). The server
listens on 127.0.0.1 when every Ray node is this machine, else on the driver node's address.

The forward and the parameters stay with the learner, as in SEED RL: no parameter copy per version leaves the
driver for inference. Every wait has a deadline: a request unanswered for `REPLY_TIMEOUT_S` fails (the actor's
unroll call raises, the trainer restarts it), and a stopped service fails every waiting request at once (its
connections are closed: the actor's read ends with the service's reason).
"""
from __future__ import annotations

import contextlib
import hmac
import logging
import secrets
import selectors
import socket
import struct
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import ray
import torch
from torch.nn.utils import vector_to_parameters

from menger.inference.service import InferenceService, batched_act
from menger.models.policy import ActOutput

log = logging.getLogger("menger.inference.ray")

REPLY_TIMEOUT_S = 60.0  # longest an actor waits for the learner's answer to a request
CONTROL_TIMEOUT_S = 60.0  # margin beyond it (connecting; sending a reply)


# ----- the wire: length-prefixed frames of named .npy arrays (no pickle) ------------------------------------------
_LENGTH = struct.Struct("!I")
_ITEM = struct.Struct("!HBBI")  # name length, dtype length, ndim, data bytes; then name, dtype, shape, data
_DIM = struct.Struct("!I")
MAX_FRAME_BYTES = 1 << 30
SECRET_BYTES = 32


def encode_frame(arrays: dict[str, np.ndarray]) -> bytes:
    """One frame: its length, then per array its name, dtype (e.g. "<f4"), shape and bytes: numbers only."""
    parts = []
    for name, array in arrays.items():
        array = np.asarray(array, order="C")  # (ascontiguousarray would make a 0-d array 1-d)
        if array.dtype.hasobject:
            raise TypeError(f"central inference frames carry numbers only; {name!r} has dtype {array.dtype}")
        label, dtype = name.encode(), array.dtype.str.encode()
        parts += [_ITEM.pack(len(label), len(dtype), array.ndim, array.nbytes), label, dtype,
                  b"".join(_DIM.pack(n) for n in array.shape), array.tobytes()]
    body = b"".join(parts)
    return _LENGTH.pack(len(body)) + body


def decode_frame(body: bytes) -> dict[str, np.ndarray]:
    """The arrays of a frame's body; ValueError for anything but plain numeric arrays of the size they claim."""
    arrays, at = {}, 0
    try:
        while at < len(body):
            name_len, dtype_len, ndim, nbytes = _ITEM.unpack_from(body, at)
            at += _ITEM.size
            name = body[at:at + name_len].decode()
            at += name_len
            dtype = np.dtype(body[at:at + dtype_len].decode())
            at += dtype_len
            shape = tuple(_DIM.unpack_from(body, at + 4 * i)[0] for i in range(ndim))
            at += 4 * ndim
            if dtype.hasobject or dtype.itemsize * int(np.prod(shape)) != nbytes or at + nbytes > len(body):
                raise ValueError(f"array {name!r}: dtype {dtype}, shape {shape} and {nbytes} bytes do not match")
            arrays[name] = np.frombuffer(body, dtype, count=int(np.prod(shape)), offset=at).reshape(shape).copy()
            at += nbytes
    except (struct.error, TypeError, UnicodeDecodeError) as exc:
        raise ValueError(f"a malformed central inference frame ({exc})") from None
    return arrays


def read_frame(conn: socket.socket) -> dict[str, np.ndarray] | None:
    """The next frame, or None when the other side closed the connection."""
    head = _read_exactly(conn, _LENGTH.size)
    if head is None:
        return None
    (length,) = _LENGTH.unpack(head)
    if length > MAX_FRAME_BYTES:
        raise ValueError(f"a central inference frame of {length} bytes is larger than {MAX_FRAME_BYTES}")
    body = _read_exactly(conn, length)
    if body is None:
        return None
    return decode_frame(body)


def _read_exactly(conn: socket.socket, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = conn.recv(n - got)
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _request_arrays(obs, state) -> dict[str, np.ndarray]:
    arrays = {f"obs.{key}": value for key, value in obs.items()} if isinstance(obs, dict) else {"obs": obs}
    if state is not None:
        arrays["state"] = state
    return arrays


def _split_request(arrays: dict[str, np.ndarray]) -> tuple:
    state = arrays.pop("state", None)
    obs = arrays["obs"] if "obs" in arrays else {name[4:]: array for name, array in arrays.items()}
    return obs, state


@dataclass
class _Connection:
    sock: socket.socket
    opened: float
    verified: bool = False
    buffer: bytearray = field(default_factory=bytearray)


class RequestServer:
    """The driver's end of the actors' sockets, driven by the inference thread alone (no thread per actor).

        take(cap, timeout_s, wait_s)   waits up to `wait_s` for a first request, then up to `timeout_s` for more,
                                       until `cap` are in (a full batch goes at once): [(connection, obs, state,
                                       seconds waited)], first come first served
        answer(replies)                each (connection, action, logp, next_state) goes back on its connection
        close(reason)                  every actor is told `reason` (its current or next request fails with it)

    `address` (host, port) and `secret` go to every actor (`RayInferenceClient`). A connection that has not sent
    the secret within `HELLO_TIMEOUT_S` is closed; until then at most the secret's 32 bytes are read from it.
    Each actor has at most one request out (it waits for its reply), so a batch holds one request per actor.
    """

    HELLO_TIMEOUT_S = 10.0

    def __init__(self, host: str):
        self.secret = secrets.token_bytes(SECRET_BYTES)
        self.listener = socket.create_server((host, 0))
        self.listener.setblocking(False)
        self.address = (host, self.listener.getsockname()[1])
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ, None)
        self.ready: deque = deque()  # (connection, frame, arrived): read, not yet taken
        self.refused = 0             # connections without the secret
        self.closed: str | None = None

    def take(self, max_requests: int, timeout_s: float, wait_s: float) -> list[tuple]:
        first_by = time.monotonic() + wait_s
        while not self.ready and not self.closed:
            remaining = first_by - time.monotonic()
            if remaining <= 0:
                return []
            self._poll(remaining)
        full_by = time.monotonic() + timeout_s
        if not self.closed:
            self._poll(0.0)
        while len(self.ready) < max_requests and not self.closed:
            remaining = full_by - time.monotonic()
            if remaining <= 0:
                break
            self._poll(remaining)
        now, batch = time.monotonic(), []
        while self.ready and len(batch) < max_requests:
            conn, frame, arrived = self.ready.popleft()
            obs, state = _split_request(frame)
            batch.append((conn, obs, state, now - arrived))
        return batch

    def answer(self, replies: list[tuple], version: int = -1) -> None:
        """`version`: the parameter version the replies' actions were taken with."""
        stamp = np.array([version], np.int64)
        for conn, action, logp, next_state in replies:
            reply = {"action": action, "logp": logp, "version": stamp}
            if next_state is not None:
                reply["next_state"] = next_state
            self._send(conn, reply)

    def close(self, reason: str) -> None:
        if self.closed:
            return
        self.closed = reason
        told = np.frombuffer(f"the central inference service has stopped: {reason}".encode(), np.uint8)
        for key in list(self.selector.get_map().values()):
            if key.data is not None and key.data.verified:
                self._send(key.data, {"error": told})
            self._drop(key.fileobj if key.data is None else key.data)
        self.selector.close()

    # ----- reading ----------------------------------------------------------------------------------------------
    def _poll(self, timeout: float) -> None:
        for key, _ in self.selector.select(timeout):
            if key.data is None:
                self._accept()
            else:
                self._read(key.data)
        now = time.monotonic()
        for key in list(self.selector.get_map().values()):
            if key.data is not None and not key.data.verified and now - key.data.opened > self.HELLO_TIMEOUT_S:
                self.refused += 1
                self._drop(key.data)

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            sock.settimeout(CONTROL_TIMEOUT_S)  # reads happen only when the selector says data is there
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.selector.register(sock, selectors.EVENT_READ, _Connection(sock, time.monotonic()))

    def _read(self, conn: _Connection) -> None:
        want = SECRET_BYTES - len(conn.buffer) if not conn.verified else 1 << 20
        try:
            data = conn.sock.recv(want)
        except OSError:
            data = b""
        if not data:  # the actor is gone (or broke its side)
            self._drop(conn)
            return
        conn.buffer += data
        if not conn.verified:
            if len(conn.buffer) < SECRET_BYTES:
                return
            if not hmac.compare_digest(bytes(conn.buffer), self.secret):
                self.refused += 1
                self._drop(conn)
                return
            conn.verified, conn.buffer = True, bytearray()
            return
        while len(conn.buffer) >= _LENGTH.size:
            (length,) = _LENGTH.unpack_from(conn.buffer)
            if length > MAX_FRAME_BYTES:
                log.warning("dropping a central inference connection: a frame of %d bytes", length)
                self._drop(conn)
                return
            if len(conn.buffer) < _LENGTH.size + length:
                return
            body = bytes(conn.buffer[_LENGTH.size:_LENGTH.size + length])
            del conn.buffer[:_LENGTH.size + length]
            try:
                frame = decode_frame(body)
            except ValueError as exc:
                log.warning("dropping a central inference connection: an unreadable request (%s)", exc)
                self._drop(conn)
                return
            self.ready.append((conn, frame, time.monotonic()))

    def _send(self, conn: _Connection, arrays: dict) -> None:
        try:
            conn.sock.sendall(encode_frame(arrays))
        except OSError:
            self._drop(conn)  # the actor died while its request was answered

    def _drop(self, conn) -> None:
        sock = conn.sock if isinstance(conn, _Connection) else conn
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(sock)
        with contextlib.suppress(OSError):
            sock.close()
        self.ready = deque(item for item in self.ready if item[0] is not conn)


class RayCentralActions:
    """The actor's side on Ray: an `ActionSource` that asks the driver over its socket instead of acting itself."""

    def __init__(self, address: tuple[str, int], secret: bytes, params, timeout_s: float = REPLY_TIMEOUT_S):
        self.address, self.secret, self.params, self.timeout_s = tuple(address), secret, params, timeout_s
        self._conn: socket.socket | None = None
        self.answered_with = -1  # the parameter version behind the newest reply

    def refresh(self) -> int:
        """The service reads the newest published parameters before every forward, so the newer of the version
        the learner offered with this unroll and the one behind the last reply is a lower bound of the version
        behind its actions (sync mode: exactly the offered one)."""
        return max(self.params.version(), self.answered_with)

    def _connect(self) -> socket.socket:
        try:
            conn = socket.create_connection(self.address, timeout=CONTROL_TIMEOUT_S)
        except OSError as exc:
            raise ConnectionError(f"cannot reach the learner's central inference at {self.address[0]}:"
                                  f"{self.address[1]} ({exc}); is the driver's node reachable from this one?") from exc
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.sendall(self.secret)
        conn.settimeout(self.timeout_s + CONTROL_TIMEOUT_S)
        return conn

    def act(self, obs, state: torch.Tensor | None) -> ActOutput:
        if self._conn is None:
            self._conn = self._connect()
        obs = {key: t.numpy() for key, t in obs.items()} if isinstance(obs, dict) else obs.numpy()
        try:
            self._conn.sendall(encode_frame(_request_arrays(obs, None if state is None else state.numpy())))
            reply = read_frame(self._conn)
        except socket.timeout:
            raise TimeoutError(f"no answer from the learner's central inference for "
                               f"{self.timeout_s + CONTROL_TIMEOUT_S:.0f} s; is the driver overloaded?") from None
        except OSError as exc:
            reply, self._conn = None, None
            raise RuntimeError(f"the central inference service has stopped (its connection broke: {exc})") from None
        if reply is None:
            self._conn = None
            raise RuntimeError("the central inference service has stopped (the learner closed its connection)")
        if "error" in reply:
            raise RuntimeError(bytes(reply["error"]).decode())
        if "version" in reply:
            self.answered_with = max(self.answered_with, int(reply["version"][0]))
        next_state = reply.get("next_state")
        return ActOutput(torch.from_numpy(reply["action"]), torch.from_numpy(reply["logp"]),
                         None if next_state is None else torch.from_numpy(next_state))

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


@dataclass(frozen=True)
class RayInferenceClient:
    """What a Ray actor receives (picklable; it travels in the actor's constructor arguments, over Ray's own
    authenticated channel): where the driver's request server listens, and its secret."""

    address: tuple[str, int]
    secret: bytes
    timeout_s: float = REPLY_TIMEOUT_S

    def actions_for(self, actor_id: int, params) -> RayCentralActions:
        return RayCentralActions(self.address, self.secret, params, self.timeout_s)


def _request_envs(obs) -> int:
    return len(next(iter(obs.values()))) if isinstance(obs, dict) else len(obs)


def _stack(requests: list) -> object:
    """One batch of N envs from the requests' observations (each [B, ...], or dicts of such)."""
    if isinstance(requests[0], dict):
        return {key: torch.from_numpy(np.concatenate([obs[key] for obs in requests])) for key in requests[0]}
    return torch.from_numpy(np.concatenate(requests))


class RayInference(InferenceService):
    """The driver's side: a thread that takes batches from the request server and answers them on the learner's device.

    `latest_parameters()` gives (version, flat float32 parameters) as last published; `max_requests` caps the
    requests answered by one forward (each brings its B envs); `timeout_s` bounds the wait for more after the
    first. `host`: where the actors' request server listens (`serving_host`).
    """

    thread_name = "menger-ray-inference"

    def __init__(self, policy, latest_parameters: Callable[[], tuple[int, np.ndarray]], device: torch.device, *,
                 max_requests: int, timeout_s: float, seed: int = 0, host: str = "127.0.0.1"):
        super().__init__(policy, device, max_requests=max_requests, timeout_s=timeout_s, seed=seed)
        self.latest_parameters = latest_parameters
        self.server = RequestServer(host)
        self.requests_answered = 0  # over the whole run: one per actor step (B env steps) acted through here

    def client(self) -> RayInferenceClient:
        return RayInferenceClient(self.server.address, self.server.secret)

    def _fail(self, reason: str) -> None:
        self.server.close(reason)

    def serve_once(self, wait_s: float) -> int:
        """Answer one batch of requests; returns how many (0 when none came within `wait_s`)."""
        taken = self.server.take(self.max_requests, self.timeout_s, wait_s)
        if not taken:
            return 0
        began = time.monotonic()
        self._refresh()
        connections, observations, states, waited = zip(*taken)
        sizes = [_request_envs(obs) for obs in observations]
        state = None if states[0] is None else torch.from_numpy(np.concatenate(states, axis=1))
        action, logp, next_state = batched_act(self.policy, _stack(list(observations)), state, self.device,
                                               self.generator)
        actions, logps = action.split(sizes), logp.split(sizes)
        next_states = next_state.split(sizes, dim=1) if next_state is not None else [None] * len(taken)
        answered_in = time.monotonic() - began
        self._counts["forwards"] += 1  # counted before the replies go: an actor holding its reply sees it counted
        self._counts["requests"] += len(taken)
        self.requests_answered += len(taken)
        self._counts["latency_s"] += sum(waited) + answered_in * len(taken)
        self.server.answer([(conn, a.numpy(), lp.numpy(), None if s is None else s.numpy())
                            for conn, a, lp, s in zip(connections, actions, logps, next_states)], self.version)
        return len(taken)

    def _refresh(self) -> None:
        """Copy the newest published parameters onto the device when their version moved."""
        version, flat = self.latest_parameters()
        if version != self.version:
            vector_to_parameters(torch.from_numpy(flat).to(self.device), self.policy.parameters())
            self.version = version

    # ----- metrics and shutdown ------------------------------------------------------------
    def actor_kwargs(self) -> dict:
        """What a Ray actor needs to ask this service instead of acting locally (see `RemoteActor`)."""
        return {"inference": self.client()}

    def close(self) -> None:
        self._stop_thread()  # the server is the inference thread's alone: closed once that has stopped
        self.server.close("the run ended")


def serving_host() -> str:
    """127.0.0.1 when every live Ray node is this machine (a local instance), else this node's address."""
    here = ray.util.get_node_ip_address()
    addresses = {node["NodeManagerAddress"] for node in ray.nodes() if node.get("Alive")}
    return "127.0.0.1" if addresses <= {here} else here


def start_ray_inference(runtime, policy, latest_parameters, device: torch.device) -> RayInference:
    """`runtime.inference.mode: central` on the ray launcher: a request server here and a running `RayInference`.

    `latest_parameters()`: (version, flat parameters) as last published.
    """
    return RayInference(policy, latest_parameters, device, max_requests=runtime.inference.batch or runtime.actors,
                        timeout_s=runtime.inference.timeout_ms / 1000.0, seed=runtime.seed + 1,
                        host=serving_host()).start()
