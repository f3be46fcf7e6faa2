"""PPO (Schulman et al. 2017): GAE advantages, then epochs of clipped-surrogate minibatch steps on each batch;
sync coordination, so every unroll of an update acted with the newest parameters."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

from menger.algorithms import Algorithm
from menger.config import field
from menger.algorithms.networks import policy_network


@dataclass(frozen=True)
class PPOConfig:
    lr: float = field(3e-4, min=0.0, doc="Adam learning rate")
    lr_schedule: Literal["constant", "linear"] = field("constant", doc="linear: anneal to 0 at stop.env_frames")
    gamma: float = field(0.99, min=0.0, max=1.0, doc="discount")
    gae_lambda: float = field(0.95, min=0.0, max=1.0, doc="GAE lambda")
    clip: float = field(0.2, min=0.0, doc="PPO ratio clip")
    epochs: int = field(4, min=1, doc="passes over each batch")
    minibatches: int = field(4, min=1, doc="minibatches per epoch")
    value_coef: float = field(0.5, min=0.0, doc="value loss weight")
    entropy_coef: float = field(0.0, min=0.0, doc="entropy bonus weight")
    value_clip: Optional[float] = field(None, doc="clip the value update to this range around the old value (None: off)")
    normalize_advantages: bool = field(True, doc="normalise advantages per minibatch")
    max_grad_norm: float = field(0.5, min=0.0, doc="gradient norm clip (0 = none)")
    target_kl: Optional[float] = field(None, doc="stop an update's epochs early past this approximate KL")
    adam_eps: float = field(1e-5, min=0.0, doc="Adam epsilon")

def _minibatches(config) -> int:
    """A feed-forward PPO shuffles steps into minibatches; a recurrent one splits whole envs' columns."""
    return config.ppo.minibatches if config.model.lstm_size else 1


ALGORITHM = Algorithm(
    name="ppo", summary="PPO: clipped surrogate on GAE advantages, sync", sections={"ppo": PPOConfig},
    settings="ppo", network=policy_network, coordination="sync", gamma=lambda config: config.ppo.gamma,
    minibatches=_minibatches, custom_network=True, independent_agents=True, recurrent=True, board_mirror=True,
    normalize=True, presets=("ppo", "cartpole-ppo", "pendulum-ppo", "pendulum-ppo-normalized", "chip-ppo",
                             "deeprm-ppo", "gpushare-ppo", "marl", "selfplay", "league", "connect4-selfplay",
                             "connect4-league", "wargame-mappo", "wargame-league"),
)
