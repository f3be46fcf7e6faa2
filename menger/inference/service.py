"""What both central inference services share: the batched forward, seeded sampling, the serving thread.

`menger.inference.central` (request slots in shared memory) and `menger.inference.ray` (a socket per actor) each
subclass `InferenceService` and call `batched_act`, so central actions equal `Policy.act`'s with the same
generator under either.
"""
from __future__ import annotations

import copy
import logging
import threading
import time

import torch

log = logging.getLogger("menger.inference")


def sample_actions(policy, out: torch.Tensor, generator: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor]:
    """`Policy.act`'s sampling on CPU parameters (`policy.head`, the action distribution: Gumbel-max for
    categoricals, Gaussians for Box actions, their product for the other spaces).

    Kept on the CPU whatever the device of the forward, so one seeded CPU generator serves every device
    (the unit tests check it against `Policy.act`).
    """
    log_std = policy.log_std.detach().float().cpu() if policy.head.num_gaussian else None
    return policy.head.sample(out, log_std, generator)


@torch.no_grad()
def batched_act(policy, obs, state: torch.Tensor | None, device: torch.device,
                generator: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """One forward on `device` over the N envs of every request in a batch; the results come back on the CPU.

    obs [N, *obs_shape] (or a dict of such), state [2, N, H] or None. Returns action [N, ...], logp [N] and the
    next state [2, N, H] (None without an LSTM). Both central services (shared-memory slots, Ray) call it.
    """
    obs = {key: t.to(device) for key, t in obs.items()} if isinstance(obs, dict) else obs.to(device)
    out, _, next_state = policy(obs, None if state is None else state.to(device))
    action, logp = sample_actions(policy, out.float().cpu(), generator)
    return action, logp, None if next_state is None else next_state.float().cpu()


class InferenceService:
    """What the local and the Ray services share: the serving thread, failure reporting and the metrics.

    A subclass defines `serve_once(wait_s) -> int` (answer one batch) and `_fail(reason)` (tell every waiting
    actor that the service is gone). `max_requests` caps the requests answered by one forward (each brings its
    B envs); `timeout_s` bounds the wait for more requests after the first one arrived.
    """

    thread_name = "menger-inference"

    def __init__(self, policy, device: torch.device, *, max_requests: int, timeout_s: float, seed: int = 0):
        if max_requests < 1:
            raise ValueError(f"max_requests must be at least 1; got {max_requests}")
        self.device = torch.device(device)
        self.policy = copy.deepcopy(policy).to(self.device).eval()
        self.max_requests, self.timeout_s = max_requests, timeout_s
        self.generator = torch.Generator().manual_seed(seed)
        self.version = -1
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._counts = {"forwards": 0, "requests": 0, "latency_s": 0.0}
        self._counted_since = time.monotonic()
        self._requests_total = 0
        self._forwards_total = 0
        self.error: str | None = None

    def start(self):
        self._thread = threading.Thread(target=self._loop, name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                self.serve_once(wait_s=0.05)
        except Exception as exc:  # noqa: BLE001 - reported to every waiting actor and in the log
            self.error = f"{type(exc).__name__}: {exc}"
            log.exception("central inference stopped")
            self._fail(f"the learner's inference thread failed ({self.error})")

    def _stop_thread(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)

    def metrics(self) -> dict[str, float]:
        """Means since the previous call: requests per forward, request-to-reply latency, requests per second;
        and `inference/requests` and `inference/forwards`, every request served and forward run so far (a run's
        last interval may have none: their ratio is the run's mean batch)."""
        counts, now = self._counts, time.monotonic()
        forwards, requests = counts["forwards"], counts["requests"]
        self._requests_total += requests
        self._forwards_total += forwards
        m = {"inference/requests": float(self._requests_total), "inference/forwards": float(self._forwards_total),
             "inference/batch_size_mean": requests / forwards if forwards else 0.0,
             "inference/latency_ms_mean": 1000.0 * counts["latency_s"] / requests if requests else 0.0,
             "inference/requests_per_s": requests / max(now - self._counted_since, 1e-9),
             "inference/version": float(self.version)}
        self._counts = {"forwards": 0, "requests": 0, "latency_s": 0.0}
        self._counted_since = now
        return m


class LocalInference:
    """`runtime.inference: local`: no service; actors run their own policy copies."""

    slots = None

    def actor_kwargs(self) -> dict:
        return {}

    def metrics(self) -> dict[str, float]:
        return {}

    def close(self) -> None:
        pass
