"""`menger tune EXP --population N`: population-based training (Jaderberg et al. 2017) over the experiment's `tune:` keys.

    members = N runs, each with its own values drawn from `tune:` and its own seed (runtime.seed + i)
    for each generation g, until stop.env_frames (every member's budget) or a member reaches stop.target_return:
        every member trains to (g + 1) * ready env frames, all at the same time     # a segment: train or resume
        ready: each member's score is its metric at the end of the segment
        exploit: each member in the bottom `quantile` copies one drawn from the top `quantile`: its whole run
                 directory (weights, optimizer state, LR schedule, counters, replay, actors' envs) in one rename
        explore: each of the copy's tuned values is resampled (probability `resample`), or else multiplied by
                 0.8 or 1.2 (kept inside its range); the next segment resumes the copy with them

A segment is an ordinary `menger train` or `menger resume` of the member's run directory, stopped by `SegmentEnd`
with its closing checkpoint; so every copy moves a checkpoint and its config together or, if the tune is killed
in between, not at all (`Population.recover`). Where members run is an executor's business:

    processes   (default) every member a `python -m menger.tuning.members --worker` process on this machine that runs its
                segments one after another; one that dies is started again and resumes from its last checkpoint
    ray         every member a Ray actor that runs its segments one after another; a member whose actor is lost
                with its node gets a new one elsewhere, which resumes from the last checkpoint (the tune directory
                must be on storage every node sees)
    inline      one after another in this process (tests, debugging)

The tune directory: `population.json` (the state `menger tune` resumes from), `lineage.jsonl` (one record per
event: start, ready, exploit, restart, failed, stopped, target, done), `lineage.png`, `members/member-NN` (run directories)
and `best.json` (the best member's run directory, which `menger eval` and `menger resume` take like any run).
"""
from __future__ import annotations

import json
import logging
import math
import os
import random
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from menger.config import ConfigError
from menger.experiment import Tuned, load_experiment, load_experiment_data, tune_spec
from menger.checkpoint import _fsync_directory as _fsync  # opens and syncs a file or a directory alike
from menger.runtime.rundir import LOCK_FILE
from menger.tuning.lineage import LINEAGE_FILE, plot_lineage, read_lineage, write_json
from menger.tuning.members import EXECUTORS, InlineMembers, PopulationError, ProcessMembers, RayMembers
from menger.tuning.search import default_metric

log = logging.getLogger("menger.pbt")  # the name its log lines always had

STATE_FILE = "population.json"
PERTURB = (0.8, 1.2)


# ----- the rules: pure functions of scores, values and a seeded RNG ------------------------------------------------
def draw(tuned: Tuned, rng: random.Random):
    """A value of one tuned key drawn from its distribution."""
    if tuned.kind == "log_uniform":
        return math.exp(rng.uniform(math.log(tuned.low), math.log(tuned.high)))
    if tuned.kind == "uniform":
        return rng.uniform(tuned.low, tuned.high)
    if tuned.kind == "int_uniform":
        return rng.randint(int(tuned.low), int(tuned.high))
    return rng.choice(list(tuned.choices))


def explore(values: dict, spec: list[Tuned], rng: random.Random, resample: float,
            perturb: tuple[float, ...] = PERTURB) -> tuple[dict, dict]:
    """The copied values, each resampled (probability `resample`) or multiplied by a factor drawn from
    `perturb` and kept inside its range (a choice is kept); returns (new values, {key: what was done})."""
    out, how = dict(values), {}
    for tuned in spec:
        if rng.random() < resample:
            out[tuned.key], how[tuned.key] = draw(tuned, rng), "resample"
        elif tuned.kind != "choice":
            factor = rng.choice(perturb)
            value = min(tuned.high, max(tuned.low, values[tuned.key] * factor))
            out[tuned.key] = int(round(value)) if tuned.kind == "int_uniform" else value
            how[tuned.key] = f"x{factor:g}"
    return out, how


def pick_exploits(scores: dict[int, float | None], quantile: float, rng: random.Random) -> list[tuple[int, int]]:
    """Truncation selection: (member, source) for each member in the bottom `quantile` by score, its source drawn
    from the top `quantile`. Members without a score (no episode finished yet) take no part; a failed member
    scores -inf, so it is always replaced."""
    ranked = sorted((m for m, s in scores.items() if s is not None), key=lambda m: (scores[m], m))
    count = max(1, int(len(ranked) * quantile)) if quantile > 0 else 0  # two members: one copies the other
    if count == 0 or len(ranked) < 2:
        return []
    bottom, top = ranked[:count], [m for m in ranked[-count:] if math.isfinite(scores[m])]
    if not top:
        return []
    return [(member, rng.choice(top)) for member in bottom if member not in top]


# ----- the population -------------------------------------------------------------------------------------------
@dataclass
class Member:
    id: int
    run_dir: str                  # relative to the tune directory
    values: dict
    seed: int
    frames: int = 0
    score: float | None = None
    status: str = "training"      # training | failed | target | stopped (by another stop rule, e.g. wall clock)
    history: list = field(default_factory=list)  # [frames, score] at each ready


@dataclass
class PBTResult:
    out_dir: Path
    best: dict | None
    members: list[Member]
    reached_at: int | None        # total env frames of the population when a member first reached the target


class Population:
    """The population's state in `out_dir/population.json`, written atomically after every step, and the rules
    that move it on (module doc)."""

    def __init__(self, out_dir: Path, *, size: int, ready: int, quantile: float, resample: float, seed: int,
                 metric: str, budget: int, target: float | None, perturb=PERTURB, direction: str = "maximize"):
        self.out_dir = out_dir
        self.size, self.ready, self.quantile, self.resample, self.seed = size, ready, quantile, resample, seed
        self.metric, self.budget, self.target, self.perturb = metric, budget, target, tuple(perturb)
        self.direction = direction
        self.sign = 1.0 if direction == "maximize" else -1.0  # ranks by sign * score: the best is the largest
        self.generation = 0
        self.members: list[Member] = []
        self.pending: list[dict] = []   # exploits decided but maybe not all copied when the tune was killed
        self.done = False
        self.reached_at: int | None = None

    # -- persistence
    def save(self) -> None:
        state = {"format": 1, "size": self.size, "ready": self.ready, "quantile": self.quantile,
                 "resample": self.resample, "seed": self.seed, "metric": self.metric, "budget": self.budget,
                 "target": self.target, "perturb": list(self.perturb), "direction": self.direction,
                 "generation": self.generation,
                 "pending": self.pending, "done": self.done, "reached_at": self.reached_at,
                 "members": [vars(m) for m in self.members]}
        write_json(self.out_dir / STATE_FILE, state)

    @classmethod
    def load(cls, out_dir: Path) -> "Population":
        state = json.loads((out_dir / STATE_FILE).read_text())
        population = cls(out_dir, size=state["size"], ready=state["ready"], quantile=state["quantile"],
                         resample=state["resample"], seed=state["seed"], metric=state["metric"],
                         budget=state["budget"], target=state["target"], perturb=state.get("perturb", PERTURB),
                         direction=state.get("direction", "maximize"))
        population.generation, population.pending = state["generation"], state["pending"]
        population.done, population.reached_at = state["done"], state.get("reached_at")
        population.members = [Member(**m) for m in state["members"]]
        return population

    def event(self, event: str, **fields) -> None:
        record = {"event": event, "time": round(time.time(), 3), "generation": self.generation, **fields}
        with open(self.out_dir / LINEAGE_FILE, "a", encoding="utf-8") as f:
            f.write(json.dumps(record, default=str) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def rng(self, purpose: str) -> random.Random:
        """The generation's own RNG: a resumed tune decides exactly as the killed one would have."""
        return random.Random(f"{self.seed}/{self.generation}/{purpose}")

    def path(self, member: Member) -> Path:
        return self.out_dir / member.run_dir

    # -- the steps
    def start(self, spec: list[Tuned], base_seed: int) -> None:
        rng = random.Random(f"{self.seed}/start")
        for i in range(self.size):
            values = {tuned.key: draw(tuned, rng) for tuned in spec}
            member = Member(i, f"members/member-{i:02d}", values, base_seed + i)
            self.members.append(member)
            self.event("start", member=i, values=values, seed=member.seed, frames=0)
        self.save()

    def segment_end(self) -> int:
        return min(self.budget, (self.generation + 1) * self.ready)

    def record(self, results: dict[int, dict]) -> None:
        """The segment's results: every member's frames and score (a failed one scores -inf)."""
        for member in self.members:
            result = results.get(member.id)
            if result is None:
                continue
            member.frames = max(member.frames, int(result["frames"]))
            if result["status"] == "failed":
                member.status, member.score = "failed", -math.inf
                self.event("failed", member=member.id, frames=member.frames, error=result["error"][:500])
            else:
                member.status = "target" if result["status"] == "target" else "training"
                member.score = result["score"]
                if member.status == "training" and member.frames < self.segment_end():
                    # another stop rule (stop.wall_clock_s) ended it before the segment's end: it is done
                    member.status = "stopped"
                    self.event("stopped", member=member.id, frames=member.frames)
            member.history.append([member.frames, member.score])
            self.event("ready", member=member.id, frames=member.frames, score=member.score, values=member.values,
                       from_frames=result.get("from_frames"))
        reached = [m for m in self.members if m.status == "target"]
        if reached and self.reached_at is None:
            self.reached_at = sum(m.frames for m in self.members)
            self.event("target", member=reached[0].id, frames=reached[0].frames, total_frames=self.reached_at,
                       score=reached[0].score)
        # a population stops when a member reaches the target; fixed members (quantile 0) each train until theirs
        training = [m for m in self.members if m.status == "training"]
        if (reached and self.quantile > 0) or all(m.frames >= self.budget for m in training):
            self.done = True
        self.save()

    def decide(self, spec: list[Tuned]) -> None:
        """Exploit and explore, decided (and saved as pending) before any directory is touched."""
        # members that are done (stopped by another rule, or at the target) are neither copied over nor copied
        scores = {m.id: self._rank(m) if m.status in ("training", "failed") else None for m in self.members}
        rng = self.rng("exploit")
        self.pending = []
        for member_id, source_id in pick_exploits(scores, self.quantile, rng):
            source = self.members[source_id]
            values, how = explore(source.values, spec, rng, self.resample, self.perturb)
            self.pending.append({"member": member_id, "source": source_id, "values": values, "explore": how})
        self.save()

    def apply(self) -> None:
        """Carry out the pending copies (again, after a kill: each is whole or absent), then the next generation."""
        for exploit in self.pending:
            member, source = self.members[exploit["member"]], self.members[exploit["source"]]
            step = copy_run(self.path(source), self.path(member))
            self.event("exploit", member=member.id, source=source.id, frames=source.frames, checkpoint=step,
                       score=member.score, source_score=source.score, old_values=member.values,
                       values=exploit["values"], explore=exploit["explore"])
            member.values, member.frames, member.score = dict(exploit["values"]), source.frames, source.score
            member.status, member.seed = "training", source.seed
        self.pending = []
        self.generation += 1
        self.save()

    def recover(self) -> None:
        """A tune killed halfway through a copy: put back any member directory left aside, drop half-made ones."""
        members = self.out_dir / "members"
        for member in self.members:
            target = self.path(member)
            if not target.exists():
                aside = sorted(members.glob(f".old-{target.name}-*"))
                if aside:
                    aside[-1].rename(target)
        for stray in members.glob(".tmp-*"):
            shutil.rmtree(stray, ignore_errors=True)
        for stray in members.glob(".old-*"):
            shutil.rmtree(stray, ignore_errors=True)

    def _rank(self, member: Member) -> float | None:
        """What ranks a member: its score, negated when the metric is minimised; -inf for a failed one."""
        if member.score is None or not math.isfinite(member.score):
            return member.score
        return self.sign * member.score

    def best(self) -> Member | None:
        scored = [m for m in self.members if m.score is not None and math.isfinite(m.score)]
        reached = [m for m in scored if m.status == "target"]
        return max(reached or scored, key=self._rank, default=None)


def copy_run(source: Path, target: Path) -> int:
    """Make `target` a copy of the run directory `source` (its newest checkpoint and everything beside the
    checkpoints: config, metrics, a self-play league's snapshots) in one
    rename: a kill at any instant leaves the old target or the whole copy (`Population.recover`). Returns the
    update count of the checkpoint copied."""
    from menger.checkpoint import CheckpointManager

    newest = CheckpointManager(source / "checkpoints").load_latest()  # verified (past a damaged one, loudly)
    if newest is None:
        raise PopulationError(f"{source} has no checkpoint to copy")
    newest_path = newest.path
    temporary = target.parent / f".tmp-{target.name}-{uuid.uuid4().hex[:8]}"
    (temporary / "checkpoints").mkdir(parents=True)
    shutil.copytree(newest_path, temporary / "checkpoints" / newest_path.name)
    for entry in source.iterdir():  # config.yaml, metrics.jsonl, a self-play league's snapshots, TensorBoard
        if entry.name in ("checkpoints", LOCK_FILE) or entry.name.startswith("."):
            continue
        if entry.is_dir():
            shutil.copytree(entry, temporary / entry.name)
        else:
            shutil.copy2(entry, temporary / entry.name)
    _fsync_tree(temporary)
    aside = target.parent / f".old-{target.name}-{uuid.uuid4().hex[:8]}"
    if target.exists():
        target.rename(aside)
    temporary.rename(target)
    _fsync(target.parent)
    shutil.rmtree(aside, ignore_errors=True)
    return int(newest.step)


def _fsync_tree(root: Path) -> None:
    """Every file and directory under `root` on disk (`fsync` opens a file or a directory alike)."""
    for directory, _, files in os.walk(root):
        for name in files:
            _fsync(Path(directory, name))
        _fsync(Path(directory))


# ----- the loop -------------------------------------------------------------------------------------------------
def train_population(experiment: str | dict, out_dir: str | Path, size: int, overrides: list[str] = (), *,
                     ready: int | None = None, quantile: float = 0.25, resample: float = 0.25, seed: int = 0,
                     metric: str | None = None, executor="processes", ray_cpus: float = 1.0,
                     perturb: tuple[float, ...] = PERTURB, direction: str = "maximize", echo=None) -> PBTResult:
    """Train (or go on with) the population in `out_dir` (module doc). `ready`: env frames between exploits
    (default: a twentieth of stop.env_frames); `quantile`: the share of members copied and copied from (0: none,
    every member keeps its values); `executor`: processes, ray, inline, or an object with their `run` and `close`."""
    overrides = list(overrides)
    config = load_experiment(experiment, overrides)
    spec = tune_spec(config)
    if not spec:
        raise ConfigError("population-based training perturbs the experiment's `tune:` keys; add a `tune:` section, "
                          "e.g. tune: {ppo.lr: {log_uniform: [1.0e-4, 1.0e-2]}}")
    if config.stop.env_frames is None:
        raise ConfigError("menger tune --population needs each member's budget: set stop.env_frames")
    if config.league.mode == "league":
        raise ConfigError("menger tune --population trains single-learner runs; a league (league.mode=league) "
                          "already trains a population of its own")
    if size < 2:
        raise ConfigError(f"--population {size}: a population needs at least 2 members to copy from")
    if not 0.0 <= quantile <= 0.5:
        raise ConfigError(f"--quantile {quantile}: give the share copied (and copied from), in [0, 0.5]; 0 keeps "
                          "every member's values (fixed settings, a random search on the same budget)")
    if not 0.0 <= resample <= 1.0:
        raise ConfigError(f"--resample {resample}: a probability, in [0, 1]")
    if direction not in ("maximize", "minimize"):
        raise ConfigError(f"direction {direction!r}: maximize or minimize")
    if isinstance(executor, str) and executor not in EXECUTORS:
        raise ConfigError(f"members on {executor!r}: one of {', '.join(EXECUTORS)}")
    ready = int(ready or max(1, config.stop.env_frames // 20))
    batch = config.batch_columns * config.runtime.unroll_length
    if ready < batch:
        raise ConfigError(f"--ready {ready}: fewer env frames than one learner batch ({batch}); give at least that")
    echo = echo or (lambda line: log.info("%s", line))
    out_dir = Path(out_dir)
    (out_dir / "members").mkdir(parents=True, exist_ok=True)
    data = load_experiment_data(experiment, overrides)
    if (out_dir / STATE_FILE).exists():
        population = Population.load(out_dir)
        if population.size != size:
            raise ConfigError(f"{out_dir} holds a population of {population.size}, not {size}; give "
                              f"--population {population.size} to go on with it, or another --out")
        population.recover()
        echo(f"resuming the population in {out_dir} at generation {population.generation}")
        given = {"ready": ready, "quantile": quantile, "resample": resample, "seed": seed}
        kept = {k: getattr(population, k) for k, v in given.items() if v != getattr(population, k)}
        if kept:
            echo(f"  it keeps the settings it started with: {kept} (start a new --out for others)")
    else:
        (out_dir / "experiment.json").write_text(json.dumps(data, indent=2, default=str))
        population = Population(out_dir, size=size, ready=ready, quantile=quantile, resample=resample, seed=seed,
                                metric=metric or default_metric(config.algo), budget=int(config.stop.env_frames),
                                target=config.stop.target_return, perturb=perturb, direction=direction)
        population.start(spec, config.runtime.seed)
    members = executor if not isinstance(executor, str) else {
        "processes": lambda: ProcessMembers(out_dir), "ray": lambda: RayMembers(ray_cpus), "inline": InlineMembers,
    }[executor]()

    def on_restart(member: int, why: str) -> None:
        population.event("restart", member=member, why=why)
        echo(f"member {member}: {why}; restarting it from its last checkpoint")

    try:
        while not population.done:
            if population.pending:  # a tune killed between deciding and copying
                population.apply()
                continue
            until = population.segment_end()
            jobs = {m.id: {"experiment": data, "overrides": [*overrides, f"runtime.seed={m.seed}"],
                           "run_dir": str(population.path(m).resolve()), "until": until, "values": m.values,
                           "metric": population.metric}
                    for m in population.members if m.status == "training"}
            population.record(members.run(jobs, on_restart))
            echo(format_generation(population))
            if not population.done:
                population.decide(spec)
                population.apply()
    finally:
        members.close()
    best = population.best()
    summary = None
    if best is not None:
        summary = {"member": best.id, "score": best.score, "frames": best.frames, "values": best.values,
                   "run_dir": str(population.path(best)), "reached_at": population.reached_at}
        write_json(out_dir / "best.json", summary)
    if not any(r.get("event") == "done" for r in read_lineage(out_dir)):
        population.event("done", best=None if best is None else best.id, reached_at=population.reached_at,
                         total_frames=sum(m.frames for m in population.members))
    try:
        plot_lineage(out_dir)
    except Exception as exc:  # noqa: BLE001 - a missing picture must not lose a finished population
        log.warning("could not draw %s: %s", out_dir / "lineage.png", exc)
    return PBTResult(out_dir, summary, population.members, population.reached_at)


def format_generation(population: Population) -> str:
    lines = [f"generation {population.generation}: {population.segment_end()} frames per member"]
    for m in population.members:
        values = "  ".join(f"{k}={_short(v)}" for k, v in m.values.items())
        score = "-" if m.score is None else f"{m.score:.4g}"
        lines.append(f"  member {m.id:>2}  {m.status:<8}  frames {m.frames:>9}  {population.metric} {score:<9}  "
                     f"{values}")
    return "\n".join(lines)


def _short(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
