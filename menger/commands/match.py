"""`menger match`: a player against an opponent for N games of a PettingZoo game, from both seats.

    from menger.commands.match import env_factory, make_opponent, play_match
    env_id = "pettingzoo.classic.connect_four_v3:env"
    result = play_match(env_factory(env_id), make_opponent("alphabeta:4", env_id, seed=0),
                        make_opponent("random", env_id, seed=1), games=400, seed=0)
    result.wins, result.draws, result.losses, result.score, result.win_rate_interval()

A player is anything with `act(observation, action_mask) -> action` (`Player`): the observation is the agent's
own (for a dict observation with an "observation" entry, that entry), the action mask the legal actions (from
the observation dict or the agent's info; all ones for a Discrete space without one). Its `reset()`, if it has
one, is called at the start of every game. A player whose `act` also takes `agent=` is told which agent acts,
and one that takes `env=` is handed the live env (a searching player clones its state from it; none steps it).

The game loop (PettingZoo's AEC API; a ParallelEnv is played through `parallel_to_aec`):

    for game in range(games):
        player_seat = seats[game % len(seats)]         # half the games in the first seat, half in the second
        env.reset(seed=seed + game)
        for agent in env.agent_iter():
            obs, reward, terminated, truncated, info = env.last()
            totals[agent] += reward                    # last()'s reward: accumulated since the agent's last move
            acting = player if agent in player_seat else opponent
            env.step(None if terminated or truncated else acting.act(observation, action_mask))
        outcome = infos' "outcome" (1 / 0 / -1) if the env reports one, else the seat's total against the others'

A seat is one agent (Connect Four: player_0, player_1), or a team: agents whose names share a prefix before
the last "_" (red_0, red_1 -> red), when the names form two groups or more. The player acts for every agent of
its seat; the opponent for all the others.
"""
from __future__ import annotations

import importlib
import inspect
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, runtime_checkable

import numpy as np

from menger.envs import bots
from menger.extras import missing_extra

Z_95 = 1.959963984540054  # the two-sided 95 % normal quantile

# Menger's bots for envs defined elsewhere: the env id's module -> the module whose BOTS / make_bot play it.
# An env module of its own (menger.envs.wargame, a user's "mypkg.game:env") is asked itself.
BOT_MODULES = bots.BOT_MODULES
TRUSTED_MODULES = ("menger",)


class MatchError(ValueError):
    """A match that cannot be played as asked: an unknown opponent, an env that is no PettingZoo game."""


class ImportNotAllowedError(MatchError):
    """A player spec names code outside Menger that the user did not allow to be imported."""


@runtime_checkable
class Player(Protocol):
    """What plays a seat: `act(observation, action_mask) -> action`; an optional `reset()` starts each game."""

    def act(self, observation, action_mask) -> Any: ...


@dataclass(frozen=True)
class MatchResult:
    """Games won, drawn and lost by the player; `by_seat` splits them by the seat it played."""

    wins: int
    draws: int
    losses: int
    games: int
    by_seat: dict = field(default_factory=dict, compare=False)

    def __post_init__(self):
        if min(self.wins, self.draws, self.losses) < 0 or self.wins + self.draws + self.losses != self.games:
            raise ValueError(f"wins {self.wins} + draws {self.draws} + losses {self.losses} must be the games "
                             f"{self.games}, none negative")

    @property
    def win_rate(self) -> float:
        return self.wins / self.games if self.games else float("nan")

    @property
    def score(self) -> float:
        """(wins + draws / 2) / games: 1 wins everything, 0.5 is an even match."""
        return (self.wins + 0.5 * self.draws) / self.games if self.games else float("nan")

    def win_rate_interval(self, z: float = Z_95) -> tuple[float, float]:
        """The Wilson score interval of the win rate (95 % by default)."""
        return wilson_interval(self.wins, self.games, z)

    def score_interval(self, z: float = Z_95) -> tuple[float, float]:
        """The Wilson interval of the score, a draw counted as half a win. Draws only shrink the score's
        variance below a binomial's of the same mean, so with draws this interval is conservative."""
        return wilson_interval(self.wins + 0.5 * self.draws, self.games, z)

    def as_dict(self) -> dict:
        out = {"games": self.games, "wins": self.wins, "draws": self.draws, "losses": self.losses,
               "score": self.score, "score_interval": list(self.score_interval()), "win_rate": self.win_rate,
               "win_rate_interval": list(self.win_rate_interval())}
        if self.by_seat:
            out["seats"] = {seat: result.as_dict() for seat, result in self.by_seat.items()}
        return out


def wilson_interval(successes: float, trials: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson's score interval for a binomial proportion: (p + z²/2n ± z sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n)."""
    if trials <= 0:
        return (0.0, 1.0)
    p, n = successes / trials, trials
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(max(p * (1 - p), 0.0) / n + z * z / (4 * n * n)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


# --- playing ---------------------------------------------------------------------------------------------------

def play_match(env_factory: Callable[[], Any], player, opponent, games: int, seed: int = 0, *,
               seats: dict[str, list[str]] | None = None, max_turns: int = 1_000_000) -> MatchResult:
    """Play `games` games of the PettingZoo env `env_factory()` (an AECEnv, or a ParallelEnv played through
    `parallel_to_aec`) between `player` and `opponent`; game g puts the player in seat g % (number of seats)
    and resets the env with seed + g. `seats`: name -> agents, instead of the seats found from the names."""
    if not isinstance(games, int) or isinstance(games, bool) or games < 1:
        raise MatchError(f"games must be a whole number >= 1, got {games!r}")
    for role, who in (("player", player), ("opponent", opponent)):
        if not callable(getattr(who, "act", None)):
            raise MatchError(f"the {role} {who!r} has no act(observation, action_mask) method")
    env = as_aec(env_factory())
    try:
        seats = dict(seats) if seats is not None else find_seats(env.possible_agents)
        if len(seats) < 2:
            raise MatchError(f"a match needs two seats or more; the env's agents {list(env.possible_agents)} "
                             "form one; pass seats={name: [agents]}")
        seat_names = list(seats)
        counts = {name: [0, 0, 0] for name in seat_names}  # wins, draws, losses
        for game in range(games):
            seat = seat_names[game % len(seat_names)]
            outcome = play_game(env, player, opponent, seats, seat, seed + game, max_turns)
            counts[seat][1 - outcome] += 1
    finally:
        env.close()
    by_seat = {name: MatchResult(w, d, l, w + d + l) for name, (w, d, l) in counts.items()}
    return MatchResult(sum(r.wins for r in by_seat.values()), sum(r.draws for r in by_seat.values()),
                       sum(r.losses for r in by_seat.values()), games, by_seat)


def play_game(env, player, opponent, seats: dict[str, list[str]], player_seat: str, seed: int,
              max_turns: int = 1_000_000) -> int:
    """One game with the player in `player_seat`: 1 won, 0 drawn, -1 lost (from the player's seat)."""
    for who in (player, opponent):
        if callable(getattr(who, "reset", None)):
            who.reset()
    env.reset(seed=seed)
    seat_of = {agent: name for name, agents in seats.items() for agent in agents}
    mine = set(seats[player_seat])
    totals = {name: 0.0 for name in seats}
    outcomes: dict[str, list[float]] = {}
    turns = 0
    for agent in env.agent_iter():
        observation, reward, terminated, truncated, info = env.last()
        if agent not in seat_of:
            raise MatchError(f"agent {agent!r} is in no seat {dict(seats)}; give seats that cover every agent")
        totals[seat_of[agent]] += float(reward)
        if terminated or truncated:
            if isinstance(info, dict) and "outcome" in info:
                outcomes.setdefault(seat_of[agent], []).append(float(info["outcome"]))
            env.step(None)
            continue
        turns += 1
        if turns > max_turns:
            raise MatchError(f"a game ran past max_turns={max_turns} moves without ending; raise max_turns or "
                             "check that the env ends its games")
        acting = player if agent in mine else opponent
        observed = _observation_and_mask(observation, info, env.action_space(agent))
        env.step(acting.act(*observed, **_told(acting, agent=agent, env=env)))
    return _outcome(player_seat, totals, outcomes)


def _told(player, **facts) -> dict:
    """What of `facts` the player's `act` takes: `agent=` (a trained team policy that tells teammates apart is
    told who acts), `env=` (a player that searches clones the game's state from it; it must not step it)."""
    try:
        parameters = inspect.signature(player.act).parameters
    except (TypeError, ValueError):
        return {}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):  # act(..., **facts): all of them
        return facts
    return {name: value for name, value in facts.items() if name in parameters}


def _observation_and_mask(observation, info, action_space):
    mask = None
    if isinstance(observation, dict) and "observation" in observation:
        mask = observation.get("action_mask")
        observation = observation["observation"]
    if mask is None and isinstance(info, dict):
        mask = info.get("action_mask")
    if mask is None and hasattr(action_space, "n"):  # Discrete: every action is legal
        mask = np.ones(int(action_space.n), np.int8)
    return observation, mask


def _outcome(player_seat: str, totals: dict[str, float], outcomes: dict[str, list[float]]) -> int:
    """The env's reported outcome for the seat if it gives one, else the seat's total reward against the best
    other seat's (for two seats of a zero-sum game, the sign of the seat's own total)."""
    if player_seat in outcomes:
        return int(np.sign(sum(outcomes[player_seat])))
    best_other = max(total for name, total in totals.items() if name != player_seat)
    return int(np.sign(round(totals[player_seat] - best_other, 9)))


def find_seats(agents) -> dict[str, list[str]]:
    """Teams by name prefix (red_0, red_1 -> "red") when that gives two groups or more; else one seat per agent."""
    teams: dict[str, list[str]] = {}
    for agent in agents:
        teams.setdefault(str(agent).rpartition("_")[0] or str(agent), []).append(agent)
    if len(teams) >= 2:
        return teams
    return {str(agent): [agent] for agent in agents}


def as_aec(env):
    """An AECEnv as it is; a ParallelEnv through PettingZoo's `parallel_to_aec`."""
    if hasattr(env, "agent_iter") and hasattr(env, "last"):
        return env
    if hasattr(env, "possible_agents") and hasattr(env, "step"):
        from pettingzoo.utils.conversions import parallel_to_aec

        return parallel_to_aec(env)
    raise MatchError(f"{type(env).__name__} is not a PettingZoo env (AECEnv or ParallelEnv); `menger match` plays "
                     "multi-agent games, e.g. --env pettingzoo.classic.connect_four_v3:env")


def env_factory(env_id: str, kwargs: dict | None = None) -> Callable[[], Any]:
    """A function that builds the PettingZoo env `env_id`: "package.module:factory"; an id of PettingZoo's
    registry ("classic/connect_four-v3", built with `pettingzoo.make("aec", id)`, else "parallel"); or a
    module with an `env()` (PettingZoo's classic games: "pettingzoo.classic.connect_four_v3")."""
    kwargs = dict(kwargs or {})
    if ":" not in str(env_id) and "/" in str(env_id):
        env_type = _registry_type(env_id)
        import pettingzoo

        return lambda: pettingzoo.make(env_type, env_id, **kwargs)
    module_name, _, attribute = str(env_id).partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        extra = missing_extra(exc, f"the env {env_id!r}")
        if extra is not None:
            raise extra from exc
        raise MatchError(f"cannot import {module_name!r} for the env {env_id!r} ({exc}); give a PettingZoo env as "
                         "'package.module:factory', e.g. pettingzoo.classic.connect_four_v3:env") from exc
    attribute = attribute or "env"
    factory = getattr(module, attribute, None)
    if not callable(factory):
        raise MatchError(f"{module_name} has no {attribute!r} to build the env {env_id!r}; give "
                         "'package.module:factory'")
    return lambda: factory(**kwargs)


def _registry_type(env_id: str) -> str:
    """"aec" or "parallel": which of PettingZoo's registries holds `env_id` (AEC first)."""
    import pettingzoo

    for env_type in ("aec", "parallel"):
        try:
            pettingzoo.spec(env_type, env_id)
            return env_type
        except Exception:  # noqa: BLE001 - PettingZoo's NameNotFound and its kin: try the other registry
            continue
    raise MatchError(f"PettingZoo's registry has no env {env_id!r} (pettingzoo.pprint_registry() lists its ids); "
                     "or give 'package.module:factory'")


def _env_module(env_id: str) -> str:
    """The module that defines the env `env_id` (for a registry id, its entry point's)."""
    if ":" not in str(env_id) and "/" in str(env_id):
        import pettingzoo

        return pettingzoo.spec(_registry_type(env_id), env_id).entry_point.partition(":")[0]
    return str(env_id).partition(":")[0]


# --- who plays -------------------------------------------------------------------------------------------------

class RandomPlayer:
    """A legal action uniformly at random (from the action mask)."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)

    def act(self, observation, action_mask):
        if action_mask is None:
            raise MatchError("the random opponent needs an action mask or a Discrete action space")
        legal = np.flatnonzero(np.asarray(action_mask))
        if legal.size == 0:
            raise MatchError("the action mask allows no action")
        return int(legal[self.rng.integers(legal.size)])


def make_opponent(spec: str, env_id: str, seed: int = 0, allow_import=(), policy: str | None = None,
                  stochastic: bool | None = None, env_kwargs: dict | None = None, search: int = 0,
                  rollouts: float = 0.0):
    """A player from its spec (the first argument of `menger match` is read the same way):

    * ``random``: a legal action uniformly at random;
    * ``alphabeta:DEPTH``, ``bot:NAME``: the env's own bots, from the ``make_bot`` / ``BOTS`` of its module
      (``BOT_MODULES`` maps envs defined elsewhere: Connect Four -> ``menger.envs.connect_four``), for the env
      made with ``env_kwargs``;
    * a run directory: a trained Menger policy (``menger.api.run_player``), its ``policy`` if named; its most
      likely action with ``stochastic=False``, one sampled from a generator seeded by `seed` with ``True`` (two
      deterministic policies play only one game per seat), and by default as the run's
      ``env.multiagent.match_actions`` says;
    * ``package.module:Factory``: any object with ``act(observation, action_mask)``, built as
      ``Factory(seed=seed)`` or ``Factory()``; imported only if its module is in ``allow_import`` (or Menger's);
    * ``openspiel:mcts:SIMULATIONS``: OpenSpiel's MCTS bot with random rollouts (``pip install
      "menger-rl[openspiel]"``), for Connect Four and Tic-Tac-Toe (``menger.search.openspiel``).

    ``search=N`` (a run directory only): the run's network plays through PUCT search of N simulations a move
    (``menger.search``); ``rollouts=W``: that search's leaf values mix in random playouts with weight W.
    """
    spec = str(spec)
    if search and not Path(spec).is_dir():
        raise MatchError(f"--search N guides a search with a trained network: give a run directory, not {spec!r}")
    if spec.startswith("openspiel:"):
        from menger.search.openspiel import openspiel_bot

        try:
            return openspiel_bot(spec[len("openspiel:"):], _env_module(env_id), seed)
        except ValueError as exc:
            raise MatchError(str(exc)) from exc
    if policy is not None and not Path(spec).is_dir():
        raise MatchError(f"--policy names a policy of a run directory; {spec!r} is a bot, which has none")
    if spec == "random":
        return RandomPlayer(seed)
    if spec == "alphabeta" or spec.startswith("alphabeta:"):
        return env_bot(spec, env_id, seed, env_kwargs)
    if spec.startswith("bot:"):
        return env_bot(spec[len("bot:"):], env_id, seed, env_kwargs)
    if Path(spec).is_dir():
        deterministic = None if stochastic is None else not stochastic
        return run_player(spec, policy, allow_import, seed, deterministic=deterministic, search=search,
                          rollouts=rollouts)
    if ":" in spec:
        return imported_player(spec, seed, allow_import)
    raise MatchError(f"unknown player {spec!r}: give random, alphabeta:DEPTH, bot:NAME, openspiel:mcts:N, a run "
                     "directory or package.module:Factory" + (f" (no directory {spec!r} exists)" if "/" in spec else ""))


def bot_module(env_id: str) -> str:
    """The module whose `BOTS` / `make_bot` play `env_id`: Menger's for an env defined elsewhere, else its own."""
    module = _env_module(env_id)
    return BOT_MODULES.get(module, module)


def env_bot(name: str, env_id: str, seed: int = 0, env_kwargs: dict | None = None):
    """The env's own bot `name` (`menger.envs.bots.env_bot`, its module found from a registry id too)."""
    try:
        return bots.env_bot(name, env_id, seed, module_name=bot_module(env_id), env_kwargs=env_kwargs)
    except bots.BotError as exc:
        raise MatchError(str(exc)) from exc


def imported_player(spec: str, seed: int = 0, allow_import=()):
    """`package.module:Factory()` (or with `seed=`), refused unless its module is allowed."""
    module_name, _, attribute = spec.partition(":")
    allowed = (*TRUSTED_MODULES, *allow_import)
    if not any(module_name == name or module_name.startswith(name + ".") for name in allowed):
        top = module_name.split(".")[0]
        raise ImportNotAllowedError(
            f"the player {spec!r} would import {module_name}, code outside Menger; a player spec may come from a "
            f"file as well as your command line, so Menger imports only what you allow: --allow-import {top} "
            f"(menger match), or allow_import=[{top!r}] (menger.commands.match.make_opponent)")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise MatchError(f"cannot import {module_name} for the player {spec!r} ({exc}); install its package or put "
                         "its folder on PYTHONPATH") from exc
    factory = getattr(module, attribute, None)
    if factory is None:
        raise MatchError(f"{module_name} has no {attribute!r} (the player {spec!r})")
    built = _construct(factory, seed)
    if not callable(getattr(built, "act", None)):
        raise MatchError(f"{spec} built {built!r}, which has no act(observation, action_mask) method")
    return built


_construct = bots.construct


def run_player(run_dir: str, policy: str | None, allow_import=(), seed: int = 0, deterministic: bool | None = None,
               search: int = 0, rollouts: float = 0.0):
    """A trained Menger run as a player (`menger.api.run_player`)."""
    from menger import api

    try:
        return api.run_player(run_dir, policy=policy, allow_import=tuple(allow_import), seed=seed,
                              deterministic=deterministic, search=search, rollouts=rollouts)
    except (ValueError, FileNotFoundError) as exc:
        raise MatchError(f"{run_dir} cannot be loaded as a player: {exc}") from exc


def match_env(player_spec: str, env_id: str | None, allow_import=()) -> tuple[str, dict]:
    """The env id and kwargs of a match: `env_id` if given, else the player's run's env."""
    if env_id:
        return env_id, {}
    if Path(player_spec).is_dir():
        from menger.api import load_run_config

        env = load_run_config(player_spec, allow_import).env
        return env.id, dict(env.kwargs)
    if "/" in player_spec or os.sep in player_spec:  # no bot's name holds a path separator
        raise MatchError(f"no run directory at {player_spec}: check the path, or train one there "
                         f"(menger train PRESET --run-dir {player_spec})")
    raise MatchError(f"the player {player_spec!r} is a bot, which plays any env: name the game with --env ENV_ID, "
                     "e.g. --env pettingzoo.classic.connect_four_v3:env (or, if it is a run directory, there is "
                     "none at that path)")


class Timed:
    """A player whose moves are timed (`seconds`: each move's wall-clock time)."""

    def __init__(self, player):
        self.player, self.seconds = player, []

    def act(self, observation, action_mask, **facts):
        start = time.perf_counter()
        action = self.player.act(observation, action_mask, **_told(self.player, **facts))
        self.seconds.append(time.perf_counter() - start)
        return action

    def reset(self) -> None:
        if callable(getattr(self.player, "reset", None)):
            self.player.reset()


def move_times(player: "Timed", opponent: "Timed") -> dict[str, float]:
    """The median seconds a move of each side took, for the match's report."""
    return {f"{who}_move_s": float(np.median(side.seconds)) for who, side in (("player", player),
                                                                              ("opponent", opponent)) if side.seconds}


def format_result(result: MatchResult, title: str) -> str:
    """The result as lines: a row per seat the player took, then the total."""
    lines = [title, f"{'player seat':<16} {'games':>6} {'wins':>6} {'draws':>6} {'losses':>6} {'score':>6} "
                    f"{'win rate':>9}  95% interval"]
    rows = [*result.by_seat.items(), ("total", result)]
    for name, row in rows:
        low, high = row.win_rate_interval()
        lines.append(f"{name:<16} {row.games:>6} {row.wins:>6} {row.draws:>6} {row.losses:>6} {row.score:>6.3f} "
                     f"{row.win_rate:>9.3f}  [{low:.3f}, {high:.3f}]")
    low, high = result.score_interval()
    lines.append(f"score {result.score:.3f} (95% interval [{low:.3f}, {high:.3f}]; a draw counts half)")
    return "\n".join(lines)
