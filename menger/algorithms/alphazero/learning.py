"""AlphaZero's learner: the positions of each batch of self-play unrolls go into a replay of the newest
`replay_size` positions (observation, visit distribution, outcome), and the network is trained on minibatches
drawn uniformly from it, `replay_ratio` samples per new position on average::

    learner = AlphaZeroLearner(policy, config.alphazero, device=d, total_frames=n, amp=False, seed=0)
    stats = learner.update(batch, frames)   # obs [T+1, B, ...], search_policy [T, B, A], rewards/dones/... [T, B]

The replay is part of `state_dict`, so a resumed run trains on the positions the stopped one had.
"""
from __future__ import annotations

import torch

from menger.algorithms.alphazero.losses import alphazero_loss, outcome_targets, value_targets
from menger.learners.learner import Learner, _obs_float, _to_device
from menger.models.encoders import MASK_KEY


class PositionReplay:
    """A ring of the newest `capacity` positions: observations (each key of a Dict observation, in its own
    dtype), target policies and target values. Its storage is made on the first `add`, from what it is given."""

    def __init__(self, capacity: int):
        self.capacity, self.size, self.next = int(capacity), 0, 0
        self.data: dict[str, torch.Tensor] = {}

    def add(self, rows: dict[str, torch.Tensor]) -> None:
        n = next(iter(rows.values())).shape[0]
        if n > self.capacity:  # more new positions than room: the newest
            rows, n = {key: value[-self.capacity:] for key, value in rows.items()}, self.capacity
        if not self.data:
            self.data = {key: torch.zeros((self.capacity, *value.shape[1:]), dtype=value.dtype, device=value.device)
                         for key, value in rows.items()}
        where = (self.next + torch.arange(n, device=next(iter(rows.values())).device)) % self.capacity
        for key, value in rows.items():
            self.data[key][where] = value
        self.next = (self.next + n) % self.capacity
        self.size = min(self.capacity, self.size + n)

    def sample(self, n: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
        index = torch.randint(self.size, (n,), generator=generator)
        return {key: value[index.to(value.device)] for key, value in self.data.items()}

    def state_dict(self) -> dict:
        return {"capacity": self.capacity, "size": self.size, "next": self.next,
                "data": {key: value[:self.size].clone() if self.size < self.capacity else value.clone()
                         for key, value in self.data.items()}}

    def load_state_dict(self, state: dict, device: torch.device) -> None:
        if state["capacity"] != self.capacity:
            raise ValueError(f"the checkpoint's replay holds {state['capacity']} positions and alphazero.replay_size "
                             f"is {self.capacity}: resume with the replay_size the run was trained with")
        self.size, self.next, self.data = int(state["size"]), int(state["next"]), {}
        for key, value in state["data"].items():
            self.data[key] = torch.zeros((self.capacity, *value.shape[1:]), dtype=value.dtype, device=device)
            self.data[key][:len(value)] = value.to(device)


def mirror_board(rows: dict[str, torch.Tensor], board_key: str, flip: torch.Tensor) -> dict[str, torch.Tensor]:
    """Rows of the replay with those where `flip` [N] is true mirrored left to right: the board (`obs.` +
    `board_key`, [N, H, W, C]) by its columns, the action mask and the target policy (one action per column)
    reversed. The outcome and every other observation entry are the same on the mirrored board."""
    out = dict(rows)
    for key, dim in ((f"obs.{board_key}", 2), (f"obs.{MASK_KEY}", -1), ("policy", -1)):
        if key in rows:
            where = flip.view(-1, *[1] * (rows[key].dim() - 1)).to(rows[key].device)
            out[key] = torch.where(where, rows[key].flip(dim), rows[key])
    return out


class AlphaZeroLearner(Learner):
    """`cfg`: lr, lr_schedule, adam_eps, weight_decay, batch_size, replay_size, replay_ratio, min_replay,
    value_weight, search_value_weight, max_grad_norm, mirror."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.board_key = self.policy.column_board_key("alphazero.mirror") if self.cfg.mirror else None
        self.replay = PositionReplay(self.cfg.replay_size)
        self.owed = 0.0  # minibatch steps owed to the positions added, carried between updates

    def _make_optimizer(self):
        return torch.optim.AdamW(self.params, lr=self.cfg.lr, eps=self.cfg.adam_eps,
                                 weight_decay=self.cfg.weight_decay, foreach=True)

    def update(self, batch: dict, frames: int) -> dict[str, float]:
        cfg = self.cfg
        batch = _to_device(batch, self.device)
        lr = self._set_lr(frames)
        z, known = outcome_targets(batch["rewards"], batch["terminated"], batch["dones"], batch["valid"])
        where = known.flatten().nonzero().squeeze(-1)
        obs = batch["obs"] if isinstance(batch["obs"], dict) else {"": batch["obs"]}
        rows = {f"obs.{key}": value[:-1].flatten(0, 1)[where] for key, value in obs.items()}
        if cfg.search_value_weight:
            z = value_targets(z, batch["search_value"], cfg.search_value_weight)
        rows.update(policy=batch["search_policy"].flatten(0, 1)[where], value=z.flatten()[where])
        if where.numel():
            self.replay.add(rows)
        self.owed += where.numel() * cfg.replay_ratio / cfg.batch_size
        steps = int(self.owed) if self.replay.size >= cfg.min_replay else 0
        self.owed -= steps
        stats = {"loss": torch.zeros(()), "policy_loss": torch.zeros(()), "value_loss": torch.zeros(()),
                 "grad_norm": torch.zeros(())}
        for _ in range(steps):
            mb = self.replay.sample(cfg.batch_size, self.generator)
            if self.board_key is not None:
                flip = torch.rand(cfg.batch_size, generator=self.generator) < 0.5
                mb = mirror_board(mb, self.board_key, flip)
            mb_obs = {key[4:]: value for key, value in mb.items() if key.startswith("obs.")}
            mb_obs = _obs_float(mb_obs[""] if "" in mb_obs else mb_obs)
            with self._autocast():
                logits, values, _ = self.policy(mb_obs)
                loss, parts = alphazero_loss(logits, values, mb["policy"], mb["value"], cfg.value_weight)
            # the stop rules read `loss`: a run whose loss is no longer finite fails, not saving broken parameters
            stats = dict(parts, loss=loss.detach(), grad_norm=self._step(loss, cfg.max_grad_norm))
        self.updates += 1
        valid = batch["valid"].sum().clamp(min=1.0)
        return dict({key: float(value) for key, value in stats.items()}, lr=lr, sgd_steps=float(steps),
                    replay_size=float(self.replay.size), positions_with_outcome=float(where.numel() / valid))

    def state_dict(self) -> dict:
        return dict(super().state_dict(), replay=self.replay.state_dict(), owed=self.owed)

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.replay.load_state_dict(state["replay"], self.device)
        self.owed = float(state["owed"])
