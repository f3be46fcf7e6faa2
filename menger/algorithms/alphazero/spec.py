"""AlphaZero (Silver et al. 2018) for two-player turn-based games: actors play every seat of their games by PUCT
search on their cached parameters and write each position with the search's visit distribution; the learner
keeps a replay of recent positions with their games' outcomes and trains the policy towards the visits and the
value towards the outcome. New versions reach the actors as for every algorithm, and a run resumes exactly."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from menger.algorithms import Algorithm
from menger.algorithms.networks import policy_network
from menger.config import field


@dataclass(frozen=True)
class AlphaZeroConfig:
    """AlphaZero's settings. The search's are AlphaZero's (c_puct 1.25, Dirichlet noise on the root's priors
    with a quarter of the weight); the replay and the optimizer are sized for a small board on a few cores."""

    search: Literal["puct", "gumbel"] = field("puct", doc="puct: AlphaZero's search, trained towards the visits; "
                                              "gumbel: Gumbel MuZero's sequential halving at the root, trained "
                                              "towards its improved policy (holds with few simulations)")
    simulations: int = field(50, min=1, doc="search walks per move")
    considered: int = field(16, min=1, doc="gumbel: the actions sequential halving starts from (the top ones by "
                            "Gumbel noise plus the prior's logits)")
    c_puct: float = field(1.25, min=0.0, doc="PUCT's exploration constant")
    search_batch: int = field(1, min=1, doc="walks per game gathered into each network call (a virtual loss "
                              "spreads them); the games of an actor are evaluated together anyway, so 1 keeps the "
                              "search sequential PUCT")
    dirichlet_alpha: float = field(1.0, min=0.0, doc="puct: Dirichlet noise's concentration (about 10 / legal "
                                   "moves: AlphaZero's 0.3 for chess, 0.03 for Go)")
    dirichlet_fraction: float = field(0.25, min=0.0, max=1.0, doc="puct: the noise's share of the root's priors "
                                      "(0: none)")
    temperature_moves: int = field(10, min=0, doc="puct: the first this many moves of a game are drawn from the "
                                   "visit distribution, the rest are the most visited move (gumbel explores by "
                                   "its noise); both: the opening random_moves applies to")
    random_moves: float = field(0.0, min=0.0, max=1.0, doc="the chance that each of a game's first "
                                "temperature_moves moves is a legal move drawn uniformly instead of the search's "
                                "(the position is still searched and trained on): openings keep varying once the "
                                "policy is sharp, where search's own noise lets self-play repeat a few games")
    lr: float = field(1e-3, min=0.0, doc="AdamW learning rate")
    lr_schedule: Literal["constant", "linear"] = field("constant", doc="linear: anneal to 0 at stop.env_frames")
    adam_eps: float = field(1e-8, min=0.0, doc="AdamW epsilon")
    weight_decay: float = field(1e-4, min=0.0, doc="AdamW's decoupled weight decay")
    batch_size: int = field(256, min=1, doc="positions per minibatch")
    replay_size: int = field(100_000, min=1, doc="the newest positions the learner trains from")
    replay_ratio: float = field(4.0, min=0.0, doc="minibatch samples drawn per new position, on average")
    min_replay: int = field(1_000, min=1, doc="positions in the replay before training starts")
    value_weight: float = field(1.0, min=0.0, doc="weight of the value's squared error against the policy's "
                                "cross-entropy")
    search_value_weight: float = field(0.0, min=0.0, max=1.0, doc="the value's target is (1 - w) z + w q: z the "
                                       "game's outcome, q the search's value of the position (the root's mean "
                                       "value after its walks); 0: AlphaZero's outcome alone")
    max_grad_norm: float = field(5.0, min=0.0, doc="gradient norm clip (0 = none)")
    mirror: bool = field(False, doc="train on each sampled position or its mirror image, at random: the board "
                         "[H, W, C] flipped left to right and the actions, one per column, reversed (Connect "
                         "Four's symmetry): twice the positions at no cost to the search")


def search_policy(config) -> dict:
    """Actors write the search's policy and value beside each step, and terminations apart from cut games."""
    return {"search_policy": True, "search_value": True, "terminated": True}


def _problems(config) -> list[str]:
    problems = []
    ma = config.env.multiagent
    if ma.critic != "local" or ma.agent_id or ma.random_opening:
        problems.append("alphazero plays every seat of each game by search: env.multiagent.critic=local, "
                        "agent_id=false and random_opening=0 are the only settings it reads (its openings vary "
                        "by alphazero.temperature_moves and the Dirichlet noise)")
    if config.league.mode != "none":
        problems.append(f"alphazero plays itself: league.mode={config.league.mode!r} has no opponents to give it; "
                        "set league.mode=none")
    if config.runtime.learner.count > 1:
        problems.append("alphazero's learner keeps the replay of positions: runtime.learner.count must be 1")
    return problems


ALGORITHM = Algorithm(
    name="alphazero", summary="AlphaZero: self-play by PUCT search, policy to the visits, value to the outcome",
    sections={"alphazero": AlphaZeroConfig}, settings="alphazero", network=policy_network, coordination="async",
    gamma=lambda config: 1.0, unroll_fields=search_policy, problems=_problems, central_inference=False,
    board_mirror=True, presets=("connect4-alphazero", "tictactoe-alphazero"),
)
