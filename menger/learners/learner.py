"""Learner steps. A batch is time-major unroll data [T, N, ...] (see menger.transport.shm for the layout).

`update(batch)` runs the loss from `menger.losses` and the optimizer, and returns scalar stats. The learner
owns the model on its device, the optimizer, the learning-rate schedule and a seeded generator for minibatch
order, and all of them are in `state_dict()` so a resumed run continues exactly.

Small networks (CartPole's 64x64 MLPs) take thousands of gradient steps of a millisecond or two, so the fixed
cost of one step counts as much as its maths: the step below clips and applies Adam with a handful of foreach
kernels over a parameter list made once, instead of `torch.optim` and `clip_grad_norm_` walking the modules and
their hooks on every call (and importing torch's compiler stack, about a second, when the optimizer is built).
"""
from __future__ import annotations

import contextlib
import math
from abc import ABC, abstractmethod

import torch
from torch import nn

from menger.losses import appo_loss, explained_variance, gae, impala_loss, ppo_loss, vtrace


class LearnerProcessError(RuntimeError):
    """A learner process (a data-parallel rank, a GORILA learner) died or stopped answering. `child_errors`:
    {"learner rank r": (its error, its traceback)} when the process reported one (`menger.explain`)."""

    child_errors: dict[str, tuple[str, str]] = {}


def _to_device(batch: dict, device: torch.device) -> dict:
    out = {}
    for key, value in batch.items():
        out[key] = _to_device(value, device) if isinstance(value, dict) else value.to(device, non_blocking=True)
    return out


def _obs_float(obs):
    if isinstance(obs, dict):
        return {k: v.float() for k, v in obs.items()}
    return obs if obs.dtype in (torch.float32, torch.uint8) else obs.float()


def _select_envs(batch: dict, index: torch.Tensor) -> dict:
    """Columns (envs) of a time-major batch; core_state is [2, N, H], everything else [L, N, ...]."""
    out = {}
    for key, value in batch.items():
        out[key] = _select_envs(value, index) if isinstance(value, dict) else value.index_select(1, index)
    return out


class Adam:
    """Adam (Kingma & Ba 2015) as torch.optim.Adam computes it (no weight decay, no amsgrad), in foreach kernels.

    Its `state_dict` has torch.optim.Adam's layout, so checkpoints written with either load into the other.
    """

    def __init__(self, params: list[torch.Tensor], lr: float, eps: float, betas: tuple[float, float] = (0.9, 0.999)):
        if not params:
            raise ValueError("Adam got no parameters to train; the policy network has none that require grad.")
        self.params, self.eps, self.betas = list(params), eps, betas
        self.param_groups = [{"lr": lr}]  # where `Learner._set_lr` writes, as with torch optimizers
        self.steps = 0
        self.exp_avg = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        """One Adam step. A parameter without a gradient this time is left alone, moments included (as torch
        does); the bias correction counts the optimizer's steps."""
        used = [i for i, p in enumerate(self.params) if p.grad is not None]
        if not used:
            return
        params, exp_avg, exp_avg_sq = self.params, self.exp_avg, self.exp_avg_sq
        if len(used) < len(params):
            params, exp_avg, exp_avg_sq = ([x[i] for i in used] for x in (params, exp_avg, exp_avg_sq))
        grads = [p.grad for p in params]
        beta1, beta2 = self.betas
        self.steps += 1
        bias1, bias2 = 1.0 - beta1 ** self.steps, 1.0 - beta2 ** self.steps
        torch._foreach_lerp_(exp_avg, grads, 1.0 - beta1)
        torch._foreach_mul_(exp_avg_sq, beta2)
        torch._foreach_addcmul_(exp_avg_sq, grads, grads, 1.0 - beta2)
        denominators = torch._foreach_sqrt(exp_avg_sq)
        torch._foreach_div_(denominators, math.sqrt(bias2))
        torch._foreach_add_(denominators, self.eps)
        torch._foreach_addcdiv_(params, exp_avg, denominators, -self.param_groups[0]["lr"] / bias1)

    def state_dict(self) -> dict:
        state = {i: {"step": torch.tensor(float(self.steps)), "exp_avg": m, "exp_avg_sq": v}
                 for i, (m, v) in enumerate(zip(self.exp_avg, self.exp_avg_sq))}
        group = {"lr": self.param_groups[0]["lr"], "betas": self.betas, "eps": self.eps, "weight_decay": 0.0,
                 "amsgrad": False, "params": list(range(len(self.params)))}
        return {"state": state, "param_groups": [group]}

    def load_state_dict(self, state_dict: dict) -> None:
        groups, state = state_dict["param_groups"], state_dict["state"]
        if len(groups) != 1 or len(groups[0]["params"]) != len(self.params):
            raise ValueError(f"the checkpoint's optimizer state is for {sum(len(g['params']) for g in groups)} "
                             f"parameters in {len(groups)} group(s); this policy has {len(self.params)} in one. "
                             "Resume with the model config the run was trained with.")
        self.param_groups[0]["lr"] = groups[0]["lr"]
        entries = [state.get(i, state.get(str(i))) for i in groups[0]["params"]]
        if any(entry is None for entry in entries):  # never stepped: torch leaves the state empty
            self.steps = 0
            return
        self.steps = int(float(entries[0]["step"]))
        for mine, entry in zip(self.exp_avg, entries):
            mine.copy_(entry["exp_avg"])
        for mine, entry in zip(self.exp_avg_sq, entries):
            mine.copy_(entry["exp_avg_sq"])


def clip_gradients(params: list[torch.Tensor], max_norm: float) -> torch.Tensor:
    """Scale all gradients together so that their global L2 norm is at most `max_norm` (clip_grad_norm_'s maths);
    returns the norm before clipping. `max_norm` <= 0: no clipping (the norm is still returned)."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return torch.zeros(())
    norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
    if max_norm > 0:
        torch._foreach_mul_(grads, (max_norm / (norm + 1e-6)).clamp_(max=1.0))
    return norm


class Learner(ABC):
    def __init__(self, policy: nn.Module, cfg, *, device: torch.device, total_frames: int | None, amp: bool,
                 seed: int):
        self.policy, self.cfg, self.device = policy.to(device), cfg, device
        self.params = [p for p in self.policy.parameters() if p.requires_grad]  # walked once, not per step
        self.total_frames = total_frames
        # The linear LR schedule as a line from (from_frames, from_lr) to 0 at to_frames; a resume that moves the
        # end re-anchors it where the run was, so the LR never jumps (`load_state_dict`).
        self.schedule = {"base_lr": float(cfg.lr), "from_frames": 0, "from_lr": float(cfg.lr),
                         "to_frames": int(total_frames or 0), "frames": 0}
        self.amp = amp
        self.generator = torch.Generator().manual_seed(seed)
        self.updates = 0
        self.optimizer = self._make_optimizer()
        self.gradient_sync = None  # several learners: set by menger.learners.distributed

    def _make_optimizer(self):
        if getattr(self.cfg, "optimizer", "adam") == "rmsprop":
            return torch.optim.RMSprop(self.params, lr=self.cfg.lr, eps=self.cfg.adam_eps, alpha=0.99, foreach=True)
        return Adam(self.params, lr=self.cfg.lr, eps=self.cfg.adam_eps)

    def _set_lr(self, frames: int) -> float:
        lr = self._scheduled_lr(self.schedule, frames)
        self.schedule["frames"] = int(frames)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr

    def _scheduled_lr(self, schedule: dict, frames: int) -> float:
        if self.cfg.lr_schedule != "linear" or not schedule["to_frames"]:
            return self.cfg.lr
        span = schedule["to_frames"] - schedule["from_frames"]
        return schedule["from_lr"] * max(0.0, (schedule["to_frames"] - frames) / span) if span > 0 else 0.0

    def _continue_schedule(self, saved: dict) -> dict:
        """The saved schedule, or, where this run's end (stop.env_frames) or base LR differs from it, a line from
        the LR the run had reached at its last update to 0 at the new end. A new base LR scales the line: the LR
        the run had reached times new / old, so the LR never jumps to the new value's start halfway through a
        decay (population-based training's x0.8 / x1.2 then means 0.8 / 1.2 of the LR the source had reached)."""
        end, base = int(self.total_frames or 0), float(self.cfg.lr)
        if saved["to_frames"] == end and saved["base_lr"] == base:
            return dict(saved)
        at = int(saved["frames"])
        lr = self._scheduled_lr(saved, at)
        if saved["base_lr"] != base:
            lr = lr * base / saved["base_lr"] if saved["base_lr"] > 0 else base
        return {"base_lr": base, "from_frames": at, "from_lr": lr, "to_frames": end, "frames": at}

    def _autocast(self):
        if not self.amp:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=torch.bfloat16)

    def _step(self, loss: torch.Tensor, max_grad_norm: float) -> torch.Tensor:
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self._sync_gradients()
        norm = clip_gradients(self.params, max_grad_norm)
        self.optimizer.step()
        return norm

    def _sync_gradients(self) -> None:
        """Data-parallel learners average their gradients here, before clipping; a no-op for one learner."""
        if self.gradient_sync is not None:
            self.gradient_sync.all_reduce(self.params)

    def _agreed(self, value: float) -> float:
        """A statistic all learners agree on (batch-weighted mean), for decisions they must take alike."""
        return value if self.gradient_sync is None else self.gradient_sync.mean(value, self.device)

    @abstractmethod
    def update(self, batch: dict, frames: int) -> dict[str, float]:
        """One learning step on a batch of unrolls; `frames` (env frames so far) drives the LR schedule."""

    def state_dict(self) -> dict:
        return {"model": self.policy.state_dict(), "optimizer": self.optimizer.state_dict(),
                "generator": self.generator.get_state(), "updates": self.updates, "lr_schedule": dict(self.schedule)}

    def load_state_dict(self, state: dict) -> None:
        self.policy.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.generator.set_state(state["generator"])
        self.updates = int(state["updates"])
        if "lr_schedule" in state:  # checkpoints of earlier versions: the schedule restarts from this run's config
            self.schedule = self._continue_schedule(state["lr_schedule"])


class PPOLearner(Learner):
    """PPO (Schulman et al. 2017): GAE on the batch, then `epochs` passes of `minibatches` clipped-surrogate steps."""

    def update(self, batch: dict, frames: int) -> dict[str, float]:
        cfg, policy = self.cfg, self.policy
        batch = _to_device(batch, self.device)
        lr = self._set_lr(frames)
        obs = _obs_float(batch["obs"])
        with torch.no_grad(), self._autocast():
            ev = policy.evaluate(obs, batch["actions"], batch["core_state"], batch["dones"])
        values = ev.values.float()
        discounts = cfg.gamma * (1.0 - batch["dones"])
        advantages, returns = gae(batch["rewards"], values[:-1], values[-1], discounts, cfg.gae_lambda)
        explained = explained_variance(values[:-1], returns, batch["valid"])  # of the values the batch acted with
        data = dict(batch, obs=obs, advantages=advantages, returns=returns, old_values=values[:-1])
        n_envs = batch["dones"].shape[1]
        minibatches = min(cfg.minibatches, n_envs) if policy.lstm_size else cfg.minibatches
        info: dict[str, torch.Tensor] = {}
        for _ in range(cfg.epochs):
            for mb in self._minibatches(data, minibatches):
                with self._autocast():
                    loss, info = self._loss(mb)
                info = dict(info, grad_norm=self._step(loss, cfg.max_grad_norm), loss=loss.detach())
            if cfg.target_kl is not None and self._agreed(float(info["approx_kl"])) > cfg.target_kl:
                break
        self.updates += 1
        return dict({k: float(v) for k, v in info.items()}, lr=lr, explained_variance=float(explained))

    def _minibatches(self, data: dict, count: int):
        if self.policy.lstm_size:  # whole sequences: split along envs
            n = data["dones"].shape[1]
            perm = torch.randperm(n, generator=self.generator).to(self.device)
            for chunk in perm.tensor_split(count):  # exactly `count` steps, as every learner must take
                yield ("seq", _select_envs(data, chunk))
            return
        flat = {key: _flatten_samples(key, data[key]) for key in _FLAT_LOSS_KEYS}  # what the loss reads, no more
        real = data["valid"].flatten().nonzero().squeeze(-1)  # real transitions only: no mask in the hot loop
        perm = real[torch.randperm(real.numel(), generator=self.generator).to(self.device)]
        for chunk in perm.tensor_split(count) if real.numel() else ():
            yield ("flat", {key: _take(value, chunk) for key, value in flat.items()})

    def _loss(self, minibatch):
        kind, mb = minibatch
        cfg, policy = self.cfg, self.policy
        if kind == "seq":
            ev = policy.evaluate(mb["obs"], mb["actions"], mb["core_state"], mb["dones"])
            new_logp, entropy, new_values = ev.logp, ev.entropy, ev.values[:-1]
        else:
            out, new_values, _ = policy(mb["obs"])
            new_logp, entropy = policy.logp_entropy(out, mb["actions"])
        if not cfg.entropy_coef:  # reported, but no part of the loss: keep it out of the backward pass
            entropy = entropy.detach()
        return ppo_loss(new_logp.float(), mb["logp"], mb["advantages"], new_values.float(), mb["old_values"],
                        mb["returns"], entropy.float(), mb["valid"] if kind == "seq" else None, clip=cfg.clip, value_coef=cfg.value_coef,
                        entropy_coef=cfg.entropy_coef, value_clip=cfg.value_clip,
                        normalize_advantages=cfg.normalize_advantages)


_FLAT_LOSS_KEYS = ("obs", "actions", "logp", "advantages", "returns", "old_values")


def _flatten_samples(key: str, value):
    """[T(+1), N, ...] -> [T*N, ...]; observations drop their bootstrap row."""
    if isinstance(value, dict):
        return {k: _flatten_samples(key, v) for k, v in value.items()}
    if key == "obs":
        value = value[:-1]
    return value.flatten(0, 1)


def _take(value, index: torch.Tensor):
    if isinstance(value, dict):
        return {k: v.index_select(0, index) for k, v in value.items()}
    return value.index_select(0, index)


class VTraceLearner(Learner):
    """IMPALA (Espeholt et al. 2018) or APPO: V-trace targets from the learner's own values, one step per batch."""

    def __init__(self, *args, appo: bool, **kwargs):
        super().__init__(*args, **kwargs)
        self.appo = appo

    def update(self, batch: dict, frames: int) -> dict[str, float]:
        cfg = self.cfg
        batch = _to_device(batch, self.device)
        lr = self._set_lr(frames)
        batch["obs"] = _obs_float(batch["obs"])
        rewards = batch["rewards"]
        if cfg.reward_clip is not None:
            batch["rewards"] = rewards.clamp(-cfg.reward_clip, cfg.reward_clip)
        n_envs = batch["dones"].shape[1]
        info: dict[str, torch.Tensor] = {}
        for _ in range(cfg.epochs if self.appo else 1):
            perm = torch.randperm(n_envs, generator=self.generator).to(self.device)
            for chunk in perm.tensor_split(min(cfg.minibatches, n_envs)):
                mb = _select_envs(batch, chunk) if cfg.minibatches > 1 else batch
                with self._autocast():
                    loss, info = self._loss(mb)
                info = dict(info, grad_norm=self._step(loss, cfg.max_grad_norm), loss=loss.detach())
        self.updates += 1
        return dict({k: float(v) for k, v in info.items()}, lr=lr)

    def _loss(self, mb: dict):
        cfg = self.cfg
        ev = self.policy.evaluate(mb["obs"], mb["actions"], mb["core_state"], mb["dones"])
        values = ev.values.float()
        target_logp = ev.logp.float()
        with torch.no_grad():
            returns = vtrace(mb["logp"], target_logp.detach(), mb["rewards"], values[:-1].detach(), values[-1].detach(),
                             cfg.gamma * (1.0 - mb["dones"]), clip_rho=cfg.clip_rho, clip_pg_rho=cfg.clip_pg_rho,
                             clip_c=cfg.clip_c, lam=cfg.lam)
        if self.appo:
            loss, info = appo_loss(target_logp, mb["logp"], values[:-1], ev.entropy.float(), returns, mb["valid"],
                                   clip=cfg.clip, value_coef=cfg.value_coef, entropy_coef=cfg.entropy_coef,
                                   normalize_advantages=cfg.normalize_advantages)
        else:
            loss, info = impala_loss(target_logp, values[:-1], ev.entropy.float(), returns, mb["valid"],
                                     value_coef=cfg.value_coef, entropy_coef=cfg.entropy_coef)
        return loss, dict(info, explained_variance=explained_variance(values[:-1], returns.vs, mb["valid"]))
