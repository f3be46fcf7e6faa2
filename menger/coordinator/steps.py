"""The learner's side of the loop: how what the coordinator makes becomes updates. The Trainer asks `ready()` and
calls `learn()`, and each role calls back `host.applied(stats)` for every update it applies (a new version,
published, reported):

    BatchSteps       one learner (or data-parallel ranks) steps on each batch the coordinator makes
    GradientRounds   GORILA: learner processes each take a replay batch, compute the gradient on the parameters
                     they last read and push it; the parameter server applies each as it comes (async) or one
                     round of a gradient per learner process (sync), and drops those too stale to apply

`host` is the Trainer: `coordinator`, `transport`, `accounts`, `learner`, `learner_group`, `version`,
`normalization`, `league`, `send_grants()`, `notify(hook, ...)`, `applied(stats)`.
"""
from __future__ import annotations

from pathlib import Path

import torch

from menger.learners.distributed import LearnerGroup
from menger.learners.gorila import GorilaWorkers


def make_steps(host, config):
    """The learner's side of `config`'s algorithm (its registry entry's `gradient_learners`)."""
    if config.algorithm.gradient_learners:
        return GradientRounds(host, config.runtime.parameter_server)
    return BatchSteps(host)


class BatchSteps:
    """One update per batch: take it (a copy: its slots may be granted again), let the actors go on, step."""

    wait_s = 0.005  # how long the loop waits for actors when nothing is to learn

    def __init__(self, host):
        self.host = host

    @staticmethod
    def start_learners(config, obs_space, action_space, run_dir: Path, resume: bool) -> LearnerGroup:
        """Data-parallel ranks 1..N-1 (`runtime.learner.count`), forked before anything touches CUDA."""
        return LearnerGroup.start(config, obs_space, action_space, run_dir, resume=resume)

    def ready(self) -> bool:
        return self.host.coordinator.batch_ready()

    def learn(self) -> bool:
        """One update (True), or nothing to apply (False, which only gradient rounds leave undone)."""
        h = self.host
        batch = h.coordinator.take_batch(h.transport.gather)
        if batch is None:  # replay on Ray: every sampled item was on a node that just died; sample again
            return True
        h.send_grants()                                               # async: actors go on while the learner steps
        h.notify("on_batch", batch)
        h.accounts.lags.extend(batch.lags)
        if h.normalization is not None:  # rewards scaled for the loss only: episode returns stay raw
            h.normalization.merge(batch.metas)
            batch.data["rewards"] = h.normalization.scale_rewards(batch.data["rewards"])
        stats = h.learner_group.update(h.learner, batch.data, h.accounts.accepted + batch.frames)
        h.coordinator.learned(batch, stats)                           # replay: new priorities go back
        h.accounts.accepted += batch.frames
        if h.league is not None:
            h.league.after_update(h.learner, h.accounts.accepted)    # a snapshot, an exploiter's reset
        h.applied(stats)
        return True

    def metrics(self) -> dict:
        return {}


class GradientRounds:
    """GORILA's learner processes push gradients; the trainer's learner is the parameter server applying them."""

    wait_s = 0.001  # learner processes' results come between actors' unrolls: look often

    def __init__(self, host, parameter_server):
        self.host, self.update, self.max_staleness = host, parameter_server.update, parameter_server.max_staleness
        self.round: list = []  # sync: the gradients of the round so far, and how many were handed out
        self.dispatched = 0
        self.stale_gradients = 0

    @staticmethod
    def start_learners(config, obs_space, action_space, run_dir: Path, resume: bool) -> GorilaWorkers:
        """`runtime.learner.count` learner processes, forked before anything touches CUDA."""
        return GorilaWorkers.start(config, obs_space, action_space)

    def ready(self) -> bool:
        workers = self.host.learner_group
        return workers.has_results() or (self._may_submit() and self.host.coordinator.batch_ready())

    def _may_submit(self) -> bool:
        """async: whenever a learner process is idle; sync: a new round once the last one is applied."""
        workers = self.host.learner_group
        if self.update == "async":
            return bool(workers.idle())
        return bool(workers.idle()) and self.dispatched < workers.alive()  # nothing is applied mid-round

    def learn(self) -> bool:
        """Apply what the learner processes pushed (each as it came, or a whole round), then hand out batches."""
        h, workers = self.host, self.host.learner_group
        workers.check()
        pushed = workers.finished()
        applied = False
        if self.update == "async":
            for one in pushed:
                applied = self._apply([one]) or applied
        else:
            self.round.extend(pushed)
            if self.round and not workers.busy() and self.dispatched >= workers.alive():  # all of it is back
                applied = self._apply(self.round)
                self.round, self.dispatched = [], 0
        while self._may_submit() and h.coordinator.batch_ready():
            batch = h.coordinator.take_batch(h.transport.gather)
            if batch is None:
                continue
            h.notify("on_batch", batch)
            h.accounts.lags.extend(batch.lags)
            h.accounts.accepted += batch.frames
            workers.submit(workers.idle()[0], batch)
            self.dispatched += self.update == "sync"
        h.send_grants()
        return applied

    def _apply(self, pushed: list) -> bool:
        """One server step on the gradients that are fresh enough (a sync round's all are); the priorities of
        every batch go back to the replay. False when every gradient was too stale."""
        h = self.host
        staleness = [h.version - one.base_version for one in pushed]
        fresh = [one for one, lag in zip(pushed, staleness) if lag <= self.max_staleness]
        self.stale_gradients += len(pushed) - len(fresh)
        for one in pushed:  # |TD| measured on the parameters the learner had: still news for the replay
            h.coordinator.learned(one.batch, {"priorities": one.priorities.numpy()})
        if not fresh:
            return False
        stats = {key: sum(one.stats[key] for one in fresh) / len(fresh) for key in fresh[0].stats}
        stats = h.learner.update({"gradient": torch.stack([one.gradient for one in fresh]), "stats": stats},
                                 h.accounts.accepted)
        stats.update(staleness_mean=sum(staleness) / len(staleness), gradients_dropped_stale=self.stale_gradients)
        h.applied(stats)
        return True

    def metrics(self) -> dict:
        return self.host.learner_group.metrics()  # the learner processes' own counts
