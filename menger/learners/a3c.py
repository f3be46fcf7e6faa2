"""A3C (Mnih et al. 2016): actor-critic gradients on n-step returns, computed where the data is.

Two ways to apply them, chosen by `runtime.learner.mode`:

* `parameter_server` (A3C): each actor is an actor-learner. After its unroll of T steps it computes the loss on
  the parameters it acted with (`A3CGradient`), writes the flat gradient into its unroll slot beside the steps,
  and only then sends the slot's tag (with `env.normalize`, on the statistics the version carries: observations in
  the network's first layer, rewards scaled by its `reward_scale`). The trainer's learner is a `GradientLearner`:
  a sharded parameter server (`menger.params.sharded`) that averages a round's gradients (sync) or steps on each
  as it comes (async). A gradient whose tag never arrived (its actor died writing it) is never read.
* `allreduce` (A2C): actors only act; `A2CLearner` computes the same loss on a batch of their unrolls, and
  `runtime.learner.count` data-parallel learners all-reduce their gradients.

Sync parameter server and all-reduce take the same step on the same unrolls (tested bit for bit).
"""
from __future__ import annotations

import torch

from menger.learners.learner import Adam, Learner, _obs_float, _to_device
from menger.losses import a3c_loss, explained_variance, gae
from menger.learners.ps import make_parameter_server
from menger.params.sharded import write_gradient

GRADIENT_STATS = ("loss", "policy_loss", "value_loss", "entropy", "explained_variance")


def a3c_unroll_loss(policy, batch: dict, cfg) -> tuple[torch.Tensor, dict]:
    """The A3C loss of a time-major batch of unrolls (obs [T+1, B], actions, rewards, dones, valid [T, B],
    core_state [2, B, H]) under `policy`: n-step returns bootstrapped from the unroll's last value, or with
    `gae_lambda` < 1 the lambda-returns, whose advantage over V(s_t) is GAE's."""
    ev = policy.evaluate(_obs_float(batch["obs"]), batch["actions"], batch["core_state"], batch["dones"])
    values = ev.values.float()
    with torch.no_grad():
        _, returns = gae(batch["rewards"], values[:-1], values[-1], cfg.gamma * (1.0 - batch["dones"]), cfg.gae_lambda)
    loss, stats = a3c_loss(ev.logp.float(), values[:-1], ev.entropy.float(), returns, batch["valid"],
                           value_coef=cfg.value_coef, entropy_coef=cfg.entropy_coef)
    stats["explained_variance"] = explained_variance(values[:-1].detach(), returns, batch["valid"])
    return loss, stats


def gradient_size(policy) -> int:
    """Entries of a pushed gradient: the learned parameters, flat, in `policy.parameters()` order."""
    return sum(p.numel() for p in policy.parameters() if p.requires_grad)


class A3CGradient:
    """An actor-learner's half of A3C: the gradient of its own unroll, written into the unroll's slot."""

    def __init__(self, policy, cfg):
        self.policy, self.cfg = policy, cfg
        self.params = [p for p in policy.parameters() if p.requires_grad]

    def compute(self, view: dict) -> None:
        """Fill `view["gradient"]` (flat, [P]) and `view["gradient_stats"]` from the unroll in `view`."""
        batch = {name: tensor for name, tensor in view.items() if not name.startswith("obs")}
        batch["obs"] = view["obs"] if "obs" in view else {n[4:]: t for n, t in view.items() if n.startswith("obs.")}
        reward_scale = getattr(self.policy, "reward_scale", None)  # env.normalize.reward: the version's statistics
        if reward_scale is not None:
            batch["rewards"] = reward_scale(batch["rewards"])
        with torch.enable_grad():
            loss, stats = a3c_unroll_loss(self.policy, batch, self.cfg)
            grads = torch.autograd.grad(loss, self.params, allow_unused=True)
        write_gradient(view["gradient"], self.params, grads)
        values = dict(stats, loss=loss.detach())
        view["gradient_stats"].copy_(torch.tensor([float(values[name]) for name in GRADIENT_STATS]))


class A2CLearner(Learner):
    """A3C's loss on a batch of unrolls, one optimizer step (all-reduced across `runtime.learner.count`)."""

    def update(self, batch: dict, frames: int) -> dict[str, float]:
        batch = _to_device(batch, self.device)
        lr = self._set_lr(frames)
        with self._autocast():
            loss, info = a3c_unroll_loss(self.policy, batch, self.cfg)
        norm = self._step(loss, self.cfg.max_grad_norm)
        self.updates += 1
        return dict({k: float(v) for k, v in info.items()}, loss=float(loss.detach()), grad_norm=float(norm), lr=lr)


class GradientLearner(Learner):
    """The trainer's learner in `parameter_server` mode: it computes nothing, it applies pushed gradients.

    A batch is K unroll slots' `gradient` [K, P] and `gradient_stats` [K, S]: one per actor of a sync round, or
    one as it arrived (async). Each weighs 1/K.
    """

    def __init__(self, policy, cfg, *, shards: int, launcher: str = "threads", **kwargs):
        """`launcher` places the shards (`menger.params.sharded.make_parameter_server`): processes of their own
        (processes), Ray actors (ray), or objects in this process (threads)."""
        self.shards, self.launcher = shards, launcher
        super().__init__(policy, cfg, **kwargs)

    def metrics(self) -> dict:
        return getattr(self.optimizer, "metrics", dict)()

    def close(self) -> None:
        """Stop the shards' processes or actors, if they have any."""
        close = getattr(getattr(self, "optimizer", None), "close", None)
        if close is not None:
            close()

    def _make_optimizer(self):
        """The sharded server: its shards in processes of their own, or in this one. A second call (a league
        reset) stops the first server's processes before it forks new ones."""
        cfg = self.cfg
        self.close()
        return make_parameter_server(self.params, self.shards, cfg.max_grad_norm,
                                     lambda params: Adam(params, lr=cfg.lr, eps=cfg.adam_eps), self.launcher)

    def update(self, batch: dict, frames: int) -> dict[str, float]:
        lr = self._set_lr(frames)
        gradients = batch["gradient"].to(self.device)
        count = gradients.shape[0]
        norm = self.optimizer.apply(gradients, [1.0 / count] * count)
        self.updates += 1
        pushed = batch["gradient_stats"].mean(0)
        stats = {name: float(pushed[i]) for i, name in enumerate(GRADIENT_STATS)}
        return dict(stats, grad_norm=float(norm), lr=lr, gradients=float(count))
