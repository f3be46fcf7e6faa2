"""Central inference (SEED RL) for the ray launcher: actors on any node, one batched forward in the learner's process.

An actor asks for actions at every step, so the hop to the learner is on the critical path of every env step. A
Ray call per request (an actor method) costs about 1 ms each way on a loaded machine, and a request then took
four of them (actor -> mailbox actor -> the driver's long poll -> answer -> reply): central inference ran 7x
slower than local. So requests travel on a plain socket from each actor to the driver, and wait there in a
mailbox, as an actor's thread in the driver::

    actor (any node):  RayCentralActions.act(obs, state) -> a frame on its socket: waits for the reply frame
    driver, one thread per actor connection: reads the frame -> mailbox.act(obs, state): waits for its answer
    mailbox.take(cap, timeout)      the driver's inference thread: the first request, then more until `cap`
                                    requests are in or `timeout` has passed (the dynamic batch, across actors)
    driver (the learner's device):  newest published parameters (the parameter server's `latest()`, when the
                                    version moved) -> one forward over every taken request's B envs -> mailbox.answer(...)
    mailbox.answer(replies)         wakes each request's connection thread, which writes its reply frame

Frames hold only numeric arrays in NumPy's .npy format, read with `allow_pickle=False`, so nothing on the
socket is ever unpickled. A connection counts only after it presents the service's secret (32 random bytes,
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
import io
import logging
import secrets
import socket
import struct
import threading
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import ray
import torch
from torch.nn.utils import vector_to_parameters

from menger.inference.service import InferenceService, batched_act
from menger.models.policy import ActOutput

log = logging.getLogger("menger.inference.ray")

REPLY_TIMEOUT_S = 60.0  # longest a request waits in the mailbox for the learner's answer
CONTROL_TIMEOUT_S = 60.0  # margin of every ray.get beyond the wait the call itself may do


@dataclass
class _Request:
    obs: object                  # np.ndarray [B, *obs_shape], or a dict of such
    state: np.ndarray | None     # [2, B, H] with an LSTM
    arrived: float               # time.monotonic() in the mailbox
    done: threading.Event
    reply: tuple | None = None   # (action [B, ...], logp [B], next_state [2, B, H] or None)


class InferenceMailbox:
    """Where actors' requests wait for the driver's inference thread: each request is a connection's thread."""

    def __init__(self, reply_timeout_s: float = REPLY_TIMEOUT_S):
        self.reply_timeout_s = reply_timeout_s
        self._changed = threading.Condition()
        self._pending: dict[int, _Request] = {}  # arrived, not yet taken (insertion order: first come, first served)
        self._taken: dict[int, _Request] = {}    # taken by the driver, not yet answered
        self._next_id = 0
        self._closed: str | None = None

    def act(self, obs, state):
        """Called by an actor: wait for this request's answer; (action, logp, next_state)."""
        with self._changed:
            if self._closed:
                raise RuntimeError(f"the central inference service has stopped: {self._closed}")
            request_id, self._next_id = self._next_id, self._next_id + 1
            request = self._pending[request_id] = _Request(obs, state, time.monotonic(), threading.Event())
            self._changed.notify_all()
        if not request.done.wait(self.reply_timeout_s):
            with self._changed:
                self._pending.pop(request_id, None)
                self._taken.pop(request_id, None)
            raise TimeoutError(f"no answer from the learner's inference thread for {self.reply_timeout_s:.0f} s; "
                               "is the learner's process overloaded or gone?")
        if request.reply is None:
            raise RuntimeError(f"the central inference service has stopped: {self._closed}")
        return request.reply

    def take(self, max_requests: int, timeout_s: float, wait_s: float) -> list[tuple]:
        """Called by the driver: up to `max_requests` requests as (id, obs, state, seconds waited so far).

        Waits up to `wait_s` for a first request, then up to `timeout_s` more for the batch to fill; [] if none.
        """
        with self._changed:
            if not self._changed.wait_for(lambda: self._pending or self._closed, wait_s) or self._closed:
                return []
            deadline = time.monotonic() + timeout_s
            while len(self._pending) < max_requests and not self._closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._changed.wait(remaining)
            now, batch = time.monotonic(), []
            for request_id in list(self._pending)[:max_requests]:
                request = self._taken[request_id] = self._pending.pop(request_id)
                batch.append((request_id, request.obs, request.state, now - request.arrived))
            return batch

    def answer(self, replies: list[tuple]) -> None:
        """Called by the driver: (id, action, logp, next_state) per taken request; wakes each one's thread."""
        for request_id, *reply in replies:
            with self._changed:
                request = self._taken.pop(request_id, None)
            if request is not None:  # gone: it timed out meanwhile
                request.reply = tuple(reply)
                request.done.set()

    def close(self, reason: str) -> None:
        """Fail every waiting request and refuse new ones (the service stopped, or the run ended)."""
        with self._changed:
            self._closed = reason
            waiting = list(self._pending.values()) + list(self._taken.values())
            self._pending.clear()
            self._taken.clear()
            self._changed.notify_all()
        for request in waiting:
            request.done.set()


# ----- the wire: length-prefixed frames of named .npy arrays (no pickle) ------------------------------------------
_LENGTH = struct.Struct("!I")
_ITEM = struct.Struct("!HI")  # name length, array bytes
MAX_FRAME_BYTES = 1 << 30
SECRET_BYTES = 32


def encode_frame(arrays: dict[str, np.ndarray]) -> bytes:
    """One frame: its length, then per array its name and its .npy bytes (dtype, shape and data; no objects)."""
    parts = []
    for name, array in arrays.items():
        buffer = io.BytesIO()
        np.lib.format.write_array(buffer, np.ascontiguousarray(array), allow_pickle=False)
        raw, label = buffer.getvalue(), name.encode()
        parts += [_ITEM.pack(len(label), len(raw)), label, raw]
    body = b"".join(parts)
    return _LENGTH.pack(len(body)) + body


def decode_frame(body: bytes) -> dict[str, np.ndarray]:
    arrays, view, at = {}, memoryview(body), 0
    while at < len(body):
        name_len, raw_len = _ITEM.unpack_from(body, at)
        at += _ITEM.size
        name = bytes(view[at:at + name_len]).decode()
        at += name_len
        arrays[name] = np.lib.format.read_array(io.BytesIO(view[at:at + raw_len]), allow_pickle=False)
        at += raw_len
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


class RequestServer:
    """The driver's end of the actors' sockets: a thread per connection hands each request to the mailbox.

    `address` (host, port) and `secret` go to every actor (`RayInferenceClient`). A connection that does not
    open with the secret within `HELLO_TIMEOUT_S` is closed unread.
    """

    HELLO_TIMEOUT_S = 10.0

    def __init__(self, mailbox: InferenceMailbox, host: str):
        self.mailbox, self.secret = mailbox, secrets.token_bytes(SECRET_BYTES)
        self.listener = socket.create_server((host, 0))
        self.listener.settimeout(0.2)  # so `close` is heard
        self.address = (host, self.listener.getsockname()[1])
        self._connections: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self.refused = 0  # connections without the secret
        threading.Thread(target=self._accept, name="menger-ray-inference-accept", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return  # closed
            threading.Thread(target=self._serve, args=(conn,), name="menger-ray-inference-conn", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(self.HELLO_TIMEOUT_S)
            try:
                hello = _read_exactly(conn, SECRET_BYTES)
            except OSError:
                hello = None
            if hello is None or not hmac.compare_digest(hello, self.secret):
                self.refused += 1
                return
            conn.settimeout(None)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                if self._closed.is_set():
                    return
                self._connections.add(conn)
            try:
                while True:
                    frame = read_frame(conn)
                    if frame is None:
                        return  # the actor is gone
                    try:
                        action, logp, next_state = self.mailbox.act(*_split_request(frame))
                        reply = {"action": action, "logp": logp}
                        if next_state is not None:
                            reply["next_state"] = next_state
                    except (TimeoutError, RuntimeError) as exc:
                        reply = {"error": np.frombuffer(str(exc).encode(), np.uint8)}
                    conn.sendall(encode_frame(reply))
            except OSError:
                return  # closed under it (the service stopped), or the actor's side broke
            finally:
                with self._lock:
                    self._connections.discard(conn)

    def close(self) -> None:
        self._closed.set()
        self.listener.close()
        with self._lock:
            connections, self._connections = list(self._connections), set()
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


class RayCentralActions:
    """The actor's side on Ray: an `ActionSource` that asks the driver over its socket instead of acting itself."""

    def __init__(self, address: tuple[str, int], secret: bytes, params, timeout_s: float = REPLY_TIMEOUT_S):
        self.address, self.secret, self.params, self.timeout_s = tuple(address), secret, params, timeout_s
        self._conn: socket.socket | None = None

    def refresh(self) -> int:
        """The service reads the newest published parameters before every forward, so the version the learner
        offered with this unroll is a lower bound of the version behind its actions (sync mode: exactly it)."""
        return self.params.version()

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
    """The driver's side: a thread that takes batches from the mailbox and answers them on the learner's device.

    `latest_parameters()` gives (version, flat float32 parameters) as last published; `max_requests` caps the
    requests answered by one forward (each brings its B envs); `timeout_s` bounds the wait for more after the
    first. `host`: where the actors' request server listens (`serving_host`).
    """

    thread_name = "menger-ray-inference"

    def __init__(self, policy, latest_parameters: Callable[[], tuple[int, np.ndarray]], device: torch.device, *,
                 max_requests: int, timeout_s: float, seed: int = 0, host: str = "127.0.0.1"):
        super().__init__(policy, device, max_requests=max_requests, timeout_s=timeout_s, seed=seed)
        self.latest_parameters = latest_parameters
        self.mailbox = InferenceMailbox(REPLY_TIMEOUT_S)
        self.server = RequestServer(self.mailbox, host)
        self.requests_answered = 0  # over the whole run: one per actor step (B env steps) acted through here

    def client(self) -> RayInferenceClient:
        return RayInferenceClient(self.server.address, self.server.secret)

    def _fail(self, reason: str) -> None:
        self.mailbox.close(reason)

    def serve_once(self, wait_s: float) -> int:
        """Answer one batch of requests; returns how many (0 when none came within `wait_s`)."""
        taken = self.mailbox.take(self.max_requests, self.timeout_s, wait_s)
        if not taken:
            return 0
        began = time.monotonic()
        self._refresh()
        ids, observations, states, waited = zip(*taken)
        sizes = [_request_envs(obs) for obs in observations]
        state = None if states[0] is None else torch.from_numpy(np.concatenate(states, axis=1))
        action, logp, next_state = batched_act(self.policy, _stack(list(observations)), state, self.device,
                                               self.generator)
        actions, logps = action.split(sizes), logp.split(sizes)
        next_states = next_state.split(sizes, dim=1) if next_state is not None else [None] * len(ids)
        self.mailbox.answer([(request_id, a.numpy(), lp.numpy(), None if s is None else s.numpy())
                             for request_id, a, lp, s in zip(ids, actions, logps, next_states)])
        answered_in = time.monotonic() - began
        self._counts["forwards"] += 1
        self._counts["requests"] += len(ids)
        self.requests_answered += len(ids)
        self._counts["latency_s"] += sum(waited) + answered_in * len(ids)
        return len(ids)

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
        self._stop_thread()
        self.mailbox.close("the run ended")
        self.server.close()


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
