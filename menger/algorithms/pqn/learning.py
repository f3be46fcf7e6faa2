"""PQN's learner (Gallici et al. 2024): Q(lambda) regression on each batch of unrolls, then the batch is dropped.

    learner = PQNLearner(PQNNetwork(obs_space, action_space), cfg, device=d, total_frames=n, amp=False, seed=0,
                         epsilon_frames=decay)
    for batch, frames in unrolls:              # obs [T+1, B, ...], actions/rewards/dones/valid [T, B]
        stats = learner.update(batch, frames)  # sets the network's epsilon: the actors get it with the parameters

No replay and no target network: the targets come from the current network, once per batch, and `epochs`
passes of `minibatches` regressions fit them (the vectorised envs decorrelate the data instead of a buffer).
"""
from __future__ import annotations

import torch

from menger.algorithms.pqn.losses import lambda_returns, q_regression_loss
from menger.algorithms.pqn.network import linear_epsilon
from menger.learners.learner import Learner, _flatten_samples, _obs_float, _take, _to_device


class PQNLearner(Learner):
    """`cfg`: lr, lr_schedule, adam_eps, gamma, lam, epochs, minibatches, max_grad_norm, loss ("mse"/"huber"),
    epsilon_start, epsilon_end. `epsilon_frames`: env frames over which epsilon falls from start to end."""

    def __init__(self, *args, epsilon_frames: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.epsilon_frames = int(epsilon_frames)
        # the first published version already explores with the schedule's value, not the network's default
        self.policy.set_epsilon(linear_epsilon(0, self.cfg.epsilon_start, self.cfg.epsilon_end, self.epsilon_frames))

    def update(self, batch: dict, frames: int) -> dict[str, float]:
        cfg = self.cfg
        batch = _to_device(batch, self.device)
        lr = self._set_lr(frames)
        obs = _obs_float(batch["obs"])
        steps, envs = batch["actions"].shape
        with torch.no_grad(), self._autocast():  # one forward over all T + 1 observations
            q_all = self.policy(_merge_time(obs)).float().view(steps + 1, envs, -1)
        targets = lambda_returns(batch["rewards"], batch["dones"], q_all[1:].max(-1).values, cfg.gamma, cfg.lam)
        data = {"obs": _flatten_samples("obs", obs), "actions": batch["actions"].flatten(),
                "targets": targets.flatten()}
        stats = {"loss": torch.zeros(()), "q_mean": torch.zeros(()), "grad_norm": torch.zeros(())}
        for _ in range(cfg.epochs):
            for mb in self._minibatches(data, batch["valid"]):
                with self._autocast():
                    loss, q_taken = self._loss(mb)
                stats = {"loss": loss.detach(), "q_mean": q_taken.mean(),
                         "grad_norm": self._step(loss, cfg.max_grad_norm)}
        epsilon = linear_epsilon(frames, cfg.epsilon_start, cfg.epsilon_end, self.epsilon_frames)
        self.policy.set_epsilon(epsilon)
        self.updates += 1
        valid = batch["valid"]
        target_mean = (targets * valid).sum() / valid.sum().clamp(min=1.0)
        return dict({k: float(v) for k, v in stats.items()}, target_mean=float(target_mean), lr=lr, epsilon=epsilon)

    def _minibatches(self, data: dict, valid: torch.Tensor):
        """`cfg.minibatches` random disjoint minibatches of the real (valid) steps, fewer if there are fewer
        steps than minibatches (an empty one would average nothing into a NaN)."""
        real = valid.flatten().nonzero().squeeze(-1)
        perm = real[torch.randperm(real.numel(), generator=self.generator).to(real.device)]
        for chunk in perm.tensor_split(min(self.cfg.minibatches, real.numel())) if real.numel() else ():
            yield {key: _take(value, chunk) for key, value in data.items()}

    def _loss(self, mb: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """The regression of Q(s_t, a_t) to its lambda target, and the (detached) Q values it regressed."""
        q = self.policy(mb["obs"]).float()
        q_taken = q.gather(-1, mb["actions"].long().unsqueeze(-1)).squeeze(-1)
        return q_regression_loss(q_taken, mb["targets"], self.cfg.loss), q_taken.detach()


def _merge_time(obs):
    """[T + 1, B, ...] -> [(T + 1) B, ...], every observation (the bootstrap row included)."""
    if isinstance(obs, dict):
        return {k: v.flatten(0, 1) for k, v in obs.items()}
    return obs.flatten(0, 1)
