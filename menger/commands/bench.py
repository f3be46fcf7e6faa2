"""`menger bench SUITE --algo A`: a generic preset across a suite of envs, seed by seed, against published numbers.

A suite is data (`menger/commands/suites/<suite>.yaml`, `load_suite`): envs with a frame budget (and an algorithm's
own, `algo_frames`, where its reference trained longer and this machine affords it), the action type, the
package whose import registers the id, a random policy's return and the published references with their source.
The bench plans one cell per env x seed (`plan_cells`) and runs them one after another::

    for cell in cells:                       # OUT/<suite>/<algo>/<env>/seed<k>
        if finished(cell): skip              # result.json: done, failed or skipped: rerun the command to go on
        runner.run(cell)                     # a subprocess per cell: `python -m menger.commands.bench CELL.json`
        write result.json                    # final and best deterministic evaluation, frames, wall-clock

A crash in a cell is a failed cell (its error in result.json), not the end of the bench; a cell killed midway
resumes from its newest checkpoint when the command is run again. Then `write_report` renders, from the finished
cells only, `table.md` / `table.json` (mean and 95 % bootstrap interval over seeds, the reference, the ratio) and
`curves.png` (deterministic-evaluation return against frames, mean over seeds with a bootstrap band).
"""
from __future__ import annotations

import dataclasses
import difflib
import importlib
import importlib.util
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Protocol, Sequence

import numpy as np
import yaml

from menger.children import die_with_parent
from menger.extras import install_hint, require

SUITES_DIR = Path(__file__).resolve().parent / "suites"  # package data: the wheel ships it
EXTRA_HINT = install_hint("suites")
RESULT_FILE, CELL_FILE, FINAL_EVAL_FILE, BENCH_FILE, LOG_FILE = (
    "result.json", "cell.json", "final_eval.json", "bench.json", "bench.log")
ACTION_TYPES = ("discrete", "continuous")
# what an algorithm's action family (menger.registry.Algorithm.actions) can act in
FAMILY_ACTS_IN = {"policy": ("discrete", "continuous"), "q": ("discrete",), "box": ("continuous",)}
BOOTSTRAP_SEED, BOOTSTRAP_RESAMPLES = 0, 2000


class SuiteError(ValueError):
    """A suite file that does not validate; the message lists every problem and the fix."""


class MissingPackageError(RuntimeError):
    """A suite env needs a package that is not installed."""


# --------------------------------------------------------------------------------------------- the suite schema
@dataclass(frozen=True)
class Source:
    title: str
    url: str


@dataclass(frozen=True)
class Reference:
    """A published return for one algorithm on one env, and where it comes from."""

    value: float
    source: Source
    algorithm: str = ""  # what was measured, e.g. "SB3 DQN (rl-zoo tuned)"
    frames: int | None = None  # the training budget of the published run
    env: str = ""  # the env version measured, when it is not the entry's (e.g. Hopper-v3)
    note: str = ""


@dataclass(frozen=True)
class RandomReturn:
    value: float
    source: Source | None = None
    computed: str = ""  # how it was computed here, when there is no published source


@dataclass(frozen=True)
class Settings:
    """Per-env settings of one algorithm, as published (rl-zoo style): applied by the bench as --set overrides."""

    source: Source
    values: Mapping[str, object]


@dataclass(frozen=True)
class Entry:
    id: str
    action: str
    frames: int  # every algorithm's budget, but those in algo_frames
    imports: tuple[str, ...] = ()
    env_set: Mapping[str, object] = field(default_factory=dict)  # keys that define the task, never learning ones
    multiagent: bool = False
    reference: Mapping[str, Reference] = field(default_factory=dict)
    random: RandomReturn | None = None
    settings: Mapping[str, Settings] = field(default_factory=dict)
    note: str = ""
    # an algorithm's own budget, e.g. its reference's where this machine affords it (a3c's 1M frames take ~35 s)
    algo_frames: Mapping[str, int] = field(default_factory=dict)
    # episodes of the final evaluation where the periodic ones' are too few to read (a game's 200, both seats); 0:
    # as many as the periodic evaluations
    final_episodes: int = 0

    def budget(self, algo: str) -> int:
        """The frames `algo` (a preset's name or the algorithm an experiment file trains) gets on this env."""
        return self.algo_frames.get(algo, self.frames)


@dataclass(frozen=True)
class Suite:
    name: str
    description: str
    algos: tuple[str, ...]
    entries: tuple[Entry, ...]
    path: Path | None = None
    note: str = ""
    evaluations: int = 20  # deterministic evaluations per cell, evenly spaced in frames

    def entry(self, env_id: str) -> Entry:
        for entry in self.entries:
            if entry.id == env_id:
                return entry
        raise SuiteError(f"suite {self.name!r} has no env {env_id!r}{_closest(env_id, [e.id for e in self.entries])}")


SUITE_KEYS = {"name", "description", "algos", "entries", "note", "evaluations", "sources"}
ENTRY_KEYS = {"id", "action", "frames", "algo_frames", "imports", "env_set", "multiagent", "reference", "random",
              "settings", "note", "final_episodes"}
REFERENCE_KEYS = {"value", "source", "algorithm", "frames", "env", "note"}
RANDOM_KEYS = {"value", "source", "computed"}
SETTINGS_KEYS = {"source", "set"}
SOURCE_KEYS = {"title", "url"}


def _closest(name: str, known: Iterable[str]) -> str:
    match = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {match[0]!r}?)" if match else ""


def _unknown(data: Mapping, known: set[str], where: str, problems: list[str]) -> None:
    for key in data:
        if key not in known:
            problems.append(f"{where}: unknown key {key!r}{_closest(str(key), known)}; known: {sorted(known)}")


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _source(data, where: str, problems: list[str]) -> Source | None:
    if not isinstance(data, Mapping):
        problems.append(f"{where}.source: give {{title: ..., url: https://...}}")
        return None
    _unknown(data, SOURCE_KEYS, f"{where}.source", problems)
    title, url = data.get("title"), data.get("url")
    if not isinstance(title, str) or not title.strip() or not isinstance(url, str) or not url.startswith("http"):
        problems.append(f"{where}.source: needs a title and an http(s) url, got {dict(data)}")
        return None
    return Source(title, url)


def _valued(data: Mapping, keys: set[str], where: str, problems: list[str]) -> bool:
    """Whether a reference's or a random return's mapping has a numeric `value`; unknown keys are problems too."""
    _unknown(data, keys, where, problems)
    if not _number(data.get("value")):
        problems.append(f"{where}.value: a number, got {data.get('value')!r}")
        return False
    return True


def _reference(data, where: str, problems: list[str]) -> Reference | None:
    if not isinstance(data, Mapping):
        problems.append(f"{where}: give {{value: NUMBER, source: {{title, url}}}}")
        return None
    valued = _valued(data, REFERENCE_KEYS, where, problems)
    frames = data.get("frames")
    if frames is not None and (not isinstance(frames, int) or frames <= 0):
        problems.append(f"{where}.frames: a whole number > 0 (the published run's budget), got {frames!r}")
    source = _source(data.get("source"), where, problems)
    if source is None or not valued:
        return None
    return Reference(float(data["value"]), source, str(data.get("algorithm", "")), frames, str(data.get("env", "")),
                     str(data.get("note", "")))


def _random(data, where: str, problems: list[str]) -> RandomReturn | None:
    if not isinstance(data, Mapping):
        problems.append(f"{where}: give {{value: NUMBER, source: {{title, url}}}} or {{value, computed: HOW}}")
        return None
    if not _valued(data, RANDOM_KEYS, where, problems):
        return None
    if "source" not in data and not str(data.get("computed", "")).strip():
        problems.append(f"{where}: say where the value comes from: source: {{title, url}} or computed: HOW")
        return None
    source = _source(data["source"], where, problems) if "source" in data else None
    return RandomReturn(float(data["value"]), source, str(data.get("computed", "")))


def _settings(data, where: str, problems: list[str]) -> Settings | None:
    if not isinstance(data, Mapping):
        problems.append(f"{where}: give {{source: {{title, url}}, set: {{KEY: VALUE}}}}")
        return None
    _unknown(data, SETTINGS_KEYS, where, problems)
    values = data.get("set")
    if not isinstance(values, Mapping) or not values or not all(isinstance(k, str) and "." in k for k in values):
        problems.append(f"{where}.set: a mapping of dotted config keys to values (e.g. apex.lr: 6.3e-4)")
        return None
    source = _source(data.get("source"), where, problems)
    return Settings(source, dict(values)) if source is not None else None


def _entry(data, where: str, problems: list[str]) -> Entry | None:
    if not isinstance(data, Mapping) or not isinstance(data.get("id"), str):
        problems.append(f"{where}: each entry is a mapping with an env id (id: CartPole-v1)")
        return None
    where = f"{where} ({data['id']})"
    _unknown(data, ENTRY_KEYS, where, problems)
    if data.get("action") not in ACTION_TYPES:
        problems.append(f"{where}.action: one of {ACTION_TYPES}, got {data.get('action')!r}")
    frames = data.get("frames")
    if not isinstance(frames, int) or isinstance(frames, bool) or frames <= 0:
        problems.append(f"{where}.frames: the frame budget, a whole number > 0, got {frames!r}")
    algo_frames = data.get("algo_frames", {})
    if not isinstance(algo_frames, Mapping) or not all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v > 0
            for k, v in algo_frames.items()):
        problems.append(f"{where}.algo_frames: a mapping of algorithm to its own frame budget, a whole number > 0 "
                        f"(a3c: 1000000), got {algo_frames!r}")
        algo_frames = {}
    final_episodes = data.get("final_episodes", 0)
    if "final_episodes" in data and (not isinstance(final_episodes, int) or isinstance(final_episodes, bool)
                                     or final_episodes <= 0):
        problems.append(f"{where}.final_episodes: episodes of the final evaluation, a whole number > 0 (200 for a "
                        f"game), got {final_episodes!r}")
        final_episodes = 0
    imports = data.get("imports", [])
    if not isinstance(imports, list) or not all(isinstance(name, str) and name for name in imports):
        problems.append(f"{where}.imports: a list of modules (or module:function) whose import registers the id")
        imports = []
    env_set = data.get("env_set", {})
    if not isinstance(env_set, Mapping) or not all(isinstance(k, str) and k.startswith("env.") for k in env_set):
        problems.append(f"{where}.env_set: env.* keys that define the task (learning settings go in settings:)")
        env_set = {}
    references = {}
    for algo, ref in (data.get("reference") or {}).items():
        parsed = _reference(ref, f"{where}.reference.{algo}", problems)
        if parsed is not None:
            references[str(algo)] = parsed
    settings = {}
    for algo, values in (data.get("settings") or {}).items():
        parsed = _settings(values, f"{where}.settings.{algo}", problems)
        if parsed is not None:
            settings[str(algo)] = parsed
    random = _random(data["random"], f"{where}.random", problems) if "random" in data else None
    if not references and not str(data.get("note", "")).strip():
        problems.append(f"{where}: no reference: say why in a note: (what was searched, what was not found)")
    return Entry(data["id"], str(data.get("action")), frames if isinstance(frames, int) else 0, tuple(imports),
                 dict(env_set), bool(data.get("multiagent", False)), references, random, settings,
                 str(data.get("note", "")), dict(algo_frames), final_episodes)


def validate_suite(data, origin: str = "suite") -> Suite:
    """A suite from its YAML data; raises SuiteError listing every problem (unknown keys with the closest known)."""
    if not isinstance(data, Mapping):
        raise SuiteError(f"{origin}: a suite file is a mapping with name, description, algos and entries")
    problems: list[str] = []
    _unknown(data, SUITE_KEYS, origin, problems)
    for key in ("name", "description"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            problems.append(f"{origin}: {key}: a non-empty string")
    algos = data.get("algos")
    if not isinstance(algos, list) or not algos or not all(isinstance(a, str) for a in algos):
        problems.append(f"{origin}: algos: the generic presets this suite is for, e.g. [ppo, apex]")
        algos = []
    evaluations = data.get("evaluations", 20)
    if not isinstance(evaluations, int) or isinstance(evaluations, bool) or evaluations < 1:
        problems.append(f"{origin}: evaluations: deterministic evaluations per cell (a curve's points), an int >= 1")
        evaluations = 20
    sources = data.get("sources", {})  # named once, referred to with YAML anchors (&rlzoo ... *rlzoo)
    if not isinstance(sources, Mapping):
        problems.append(f"{origin}: sources: a mapping of names to {{title, url}}")
        sources = {}
    for name, source in sources.items():
        _source(source, f"{origin}: sources.{name}", problems)
    raw_entries = data.get("entries")
    if not isinstance(raw_entries, list) or not raw_entries:
        problems.append(f"{origin}: entries: a non-empty list of envs")
        raw_entries = []
    entries = [_entry(item, f"{origin}: entries[{i}]", problems) for i, item in enumerate(raw_entries)]
    ids = [e.id for e in entries if e is not None]
    problems += [f"{origin}: env {i!r} is listed twice" for i in sorted({i for i in ids if ids.count(i) > 1})]
    if problems:
        raise SuiteError("\n  ".join([f"{origin} does not validate:", *problems]))
    return Suite(data["name"], data["description"], tuple(algos), tuple(e for e in entries if e is not None),
                 note=str(data.get("note", "")), evaluations=evaluations)


def suite_names(directory: Path = SUITES_DIR) -> list[str]:
    return sorted(path.stem for path in directory.glob("*.yaml")) if directory.is_dir() else []


def load_suite(name_or_path: str | os.PathLike, directory: Path = SUITES_DIR) -> Suite:
    """A suite by name (a file in menger/commands/suites) or by path."""
    path = Path(name_or_path)
    if not path.is_file():
        path = directory / f"{name_or_path}.yaml"
    if not path.is_file():
        names = suite_names(directory)
        raise SuiteError(f"no suite {str(name_or_path)!r}{_closest(str(name_or_path), names)}: give one of {names} "
                         f"(files in {directory}) or the path of a suite YAML file")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise SuiteError(f"{path}: not valid YAML ({error})") from error
    return dataclasses.replace(validate_suite(data, str(path)), path=path.resolve())


# ------------------------------------------------------------------------------------------------------ the cells
@dataclass(frozen=True)
class Cell:
    """One env x seed of a bench: what the subprocess trains and where."""

    suite: str
    algo: str
    env: str
    seed: int
    frames: int
    run_dir: Path
    overrides: tuple[str, ...]
    imports: tuple[str, ...] = ()
    eval_episodes: int = 10
    skip_reason: str = ""  # the algorithm cannot act in this env: recorded, never trained
    final_episodes: int = 0  # the final evaluation's episodes; 0: eval_episodes

    def train_command(self) -> str:
        """The equivalent `menger train` line, for the record (imports: what the bench imports first)."""
        sets = " ".join(f"--set {_quote(o)}" for o in self.overrides)
        before = f"(python -c 'import {', '.join(m.split(':')[0] for m in self.imports)}' first) " if self.imports \
            else ""
        return f"{before}menger train {self.algo} {sets} --run-dir {self.run_dir}"

    def as_json(self) -> dict:
        return {**dataclasses.asdict(self), "run_dir": str(self.run_dir)}


def _quote(text: str) -> str:
    return text if re.fullmatch(r"[\w.,=/:+-]+", text) else "'" + text.replace("'", "'\\''") + "'"


def env_slug(env_id: str) -> str:
    """A directory name for an env id: `menger/CartPoleNoVel-v0` -> `menger_CartPoleNoVel-v0`."""
    return re.sub(r"[^\w.-]+", "_", env_id).strip("_")


def _yaml_value(value) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=10_000).strip().removesuffix("...").strip()


def skip_reason(entry: Entry, algo: str, family: str, multi_agent: bool, preset_multiagent: bool) -> str:
    """Why `algo` (its action family, whether it plays PettingZoo envs) cannot train on `entry`; "" if it can."""
    acts_in = FAMILY_ACTS_IN.get(family, ACTION_TYPES)
    if entry.action not in acts_in:
        return (f"{algo} acts in {family!r} action spaces ({', '.join(acts_in)} only); {entry.id} has "
                f"{entry.action} actions")
    if entry.multiagent and not (multi_agent and preset_multiagent):
        return f"{entry.id} is a multi-agent (PettingZoo) env; {algo} is not a multi-agent preset (try marl)"
    if not entry.multiagent and preset_multiagent:
        return f"{algo} is a multi-agent preset; {entry.id} is a single-agent env"
    return ""


def cell_overrides(entry: Entry, algo: str, seed: int, frames: int, evaluations: int,
                   eval_episodes: int, published: bool = False) -> tuple[str, ...]:
    """The --set overrides of one cell: the env, the budget, the seed, `evaluations` deterministic evaluations
    evenly spaced in frames (the same curve points on any machine), then the env's
    task keys and, with `published`, the algorithm's published per-env settings (named in the suite, never in
    the preset); without, the generic preset alone."""
    base = [f"env.id={entry.id}", f"stop.env_frames={frames}", f"runtime.seed={seed}",
            f"eval.interval_frames={max(1, frames // evaluations)}", f"eval.episodes={eval_episodes}"]
    extra = dict(entry.env_set)
    if published and algo in entry.settings:
        extra.update(entry.settings[algo].values)
    return tuple(base + [f"{key}={_yaml_value(value)}" for key, value in extra.items()])


def plan_cells(suite: Suite, algo: str, seeds: Sequence[int], out: Path, *, envs: Sequence[str] = (),
               frames_scale: float = 1.0, evaluations: int | None = None, eval_episodes: int = 10,
               published: bool = False,
               describe_algo: Callable[[str], tuple[str, bool, bool]] | None = None) -> list[Cell]:
    """One cell per env x seed, in suite order. `describe_algo(algo)` -> (action family, multi-agent capable,
    preset is multi-agent); by default it reads the preset and the algorithm registry. `published`: apply the
    suite's published per-env settings; the cells go under OUT/SUITE/ALGO+published, apart from the generic
    preset's."""
    if frames_scale <= 0:
        raise SuiteError(f"--frames-scale {frames_scale}: give a factor > 0 (0.1 for a tenth of each budget)")
    if not seeds or len(set(seeds)) != len(seeds):
        raise SuiteError(f"seeds {list(seeds)}: give at least one seed, each once")
    family, multi_agent, preset_multiagent = (describe_algo or describe_preset)(algo)
    entries = [suite.entry(env_id) for env_id in envs] if envs else list(suite.entries)
    points = evaluations if evaluations is not None else suite.evaluations
    cells, key = [], reference_key(algo)
    for entry in entries:
        frames = max(1, int(round(entry.budget(key) * frames_scale)))
        reason = skip_reason(entry, algo, family, multi_agent, preset_multiagent)
        for seed in seeds:
            run_dir = out / suite.name / algo_folder(algo, published) / env_slug(entry.id) / f"seed{seed}"
            cells.append(Cell(suite.name, algo, entry.id, seed, frames, run_dir,
                              cell_overrides(entry, algo, seed, frames, points, eval_episodes, published),
                              entry.imports, eval_episodes, reason, entry.final_episodes))
    return cells


def is_experiment_file(algo: str) -> bool:
    """Whether --algo names an experiment file of the user's (`my-apex.yaml`, `configs/apex.yml`), not a preset."""
    return algo.endswith((".yaml", ".yml")) or "/" in algo or os.sep in algo


def algo_folder(algo: str, published: bool) -> str:
    """Where an algorithm's cells go in a suite's folder: the generic preset's (an experiment file's: its stem), or
    with the published settings."""
    name = Path(algo).stem if is_experiment_file(algo) else algo
    return f"{name}+published" if published else name


def _file_algorithm(path: str) -> str:
    """The algorithm an experiment file trains (its `algo:`, or what it extends)."""
    from menger.experiment import load_experiment

    return load_experiment(path).algo


def reference_key(algo: str) -> str:
    """Whose published numbers a table stands beside: a preset's own name, or the algorithm an experiment file of
    the user's trains (a file that is gone by the time a report is rendered: its name)."""
    if not is_experiment_file(algo):
        return algo
    try:
        return _file_algorithm(algo)
    except (OSError, ValueError):
        return Path(algo).stem


def describe_preset(algo: str) -> tuple[str, bool, bool]:
    """(action family, the algorithm plays multi-agent envs, the preset names agents to learn) of the preset."""
    from menger import registry
    from menger.experiment import load_experiment

    config = load_experiment(algo)
    entry = registry.get(config.algo)
    return entry.actions, bool(entry.multi_agent), bool(config.env.multiagent.learn or config.league.mode != "none")


def check_imports(cells: Sequence[Cell]) -> None:
    """Refuse, before anything trains, a suite whose env packages are missing, naming the extra to install."""
    missing = sorted({name.split(":")[0] for cell in cells if not cell.skip_reason for name in cell.imports
                      if importlib.util.find_spec(name.split(":")[0].split(".")[0]) is None})
    if missing:
        envs = sorted({c.env for c in cells if any(n.split(":")[0] in missing for n in c.imports)})
        raise MissingPackageError(f"the envs {envs} need {missing}, which are not installed: {EXTRA_HINT} (a "
                                  "package outside the extra is named in the suite's note), or leave them out with "
                                  "--envs")


# ----------------------------------------------------------------------------------------------- running the cells
class CellRunner(Protocol):
    """Trains one cell into `cell.run_dir` (resuming it when `resume`); returns the exit code. The bench drives it::

        code = runner.run(cell, resume=has_checkpoint(cell.run_dir))
    """

    def run(self, cell: Cell, resume: bool) -> int: ...


@dataclass(frozen=True)
class SubprocessCells:
    """Each cell in its own Python process (`python -m menger.commands.bench CELL.json`), its output in bench.log:
    a crash, a segfault or an out-of-memory kill ends that cell only; a bench that is killed stops its cell too
    (`die_with_parent`), which the same command resumes."""

    timeout_s: float | None = None

    def run(self, cell: Cell, resume: bool) -> int:
        argv = [sys.executable, "-m", "menger.commands.bench", str(cell.run_dir / CELL_FILE)]
        with open(cell.run_dir / LOG_FILE, "a", encoding="utf-8") as log:
            log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {'resume' if resume else 'train'}: "
                      f"{cell.train_command()}\n")
            log.flush()
            try:
                return subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, timeout=self.timeout_s,
                                      preexec_fn=die_with_parent).returncode
            except subprocess.TimeoutExpired:
                log.write(f"bench: the cell ran past {self.timeout_s} s and was stopped\n")
                return 124


def has_checkpoint(run_dir: Path) -> bool:
    checkpoints = run_dir / "checkpoints"
    return checkpoints.is_dir() and any(checkpoints.iterdir())


def read_result(run_dir: Path) -> dict | None:
    path = run_dir / RESULT_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    except json.JSONDecodeError:
        return None  # a torn write: the cell runs again


def _write_json(path: Path, data) -> None:
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(data, indent=1, allow_nan=False, default=str) + "\n", encoding="utf-8")
    os.replace(partial, path)


@dataclass
class BenchSummary:
    ran: list[Cell] = field(default_factory=list)
    finished_before: list[Cell] = field(default_factory=list)
    failed: list[Cell] = field(default_factory=list)
    skipped: list[Cell] = field(default_factory=list)
    stopped: Cell | None = None  # the cell a SIGTERM or SIGHUP stopped (with a checkpoint): the bench stopped there
    exit_code: int = 0  # 128 + the signal's number when one stopped it, as `menger train`


# a cell's exit code when a signal stopped it at a checkpoint (`cell_main`): unfinished, not failed
STOPPED_BY_SIGNAL = {128 + signal.SIGTERM: "SIGTERM", 128 + signal.SIGHUP: "SIGHUP"}


def run_bench(cells: Sequence[Cell], runner: CellRunner, command: str, *, retry_failed: bool = False,
              echo: Callable[[str], None] = print) -> BenchSummary:
    """Run every unfinished cell, one after another; a finished one (result.json) is skipped, a killed one resumes."""
    summary = BenchSummary()
    for number, cell in enumerate(cells, 1):
        where = f"[{number}/{len(cells)}] {cell.env} seed {cell.seed}"
        done = read_result(cell.run_dir)
        if done is not None and not (retry_failed and done.get("status") == "failed"):
            summary.finished_before.append(cell)
            echo(f"{where}: {done.get('status')} before, skipped ({cell.run_dir / RESULT_FILE})")
            if done.get("budget") not in (None, cell.frames):
                echo(f"{where}: warning: it trained {done['budget']} frames, not {cell.frames}; give another --out "
                     "for another budget")
            continue
        if cell.skip_reason:
            cell.run_dir.mkdir(parents=True, exist_ok=True)
            _write_json(cell.run_dir / RESULT_FILE, skipped_result(cell, command))
            summary.skipped.append(cell)
            echo(f"{where}: skipped: {cell.skip_reason}")
            continue
        resume = has_checkpoint(cell.run_dir)
        if not resume and cell.run_dir.exists():
            shutil.rmtree(cell.run_dir)  # started, but killed before its first checkpoint: start it again
        cell.run_dir.mkdir(parents=True, exist_ok=True)
        _write_json(cell.run_dir / CELL_FILE, cell.as_json())
        echo(f"{where}: {'resuming' if resume else 'training'} {cell.frames} frames -> {cell.run_dir}")
        started = time.monotonic()
        code = runner.run(cell, resume)
        if code in STOPPED_BY_SIGNAL:  # the cell wrote its checkpoint and stopped as asked: so does the bench
            summary.stopped, summary.exit_code = cell, code
            echo(f"{where}: stopped by {STOPPED_BY_SIGNAL[code]} with a checkpoint; run the same command again to "
                 "resume it")
            break
        result = cell_result(cell, code, time.monotonic() - started, command)
        _write_json(cell.run_dir / RESULT_FILE, result)
        summary.ran.append(cell)
        if result["status"] == "failed":
            summary.failed.append(cell)
            echo(f"{where}: FAILED ({result['error']}); see {cell.run_dir / LOG_FILE}")
        else:
            echo(f"{where}: final {result['final_return']:.4g}, best {result['best_return']:.4g} at "
                 f"{result['frames']} frames in {result['wall_s']:.0f} s")
    return summary


def skipped_result(cell: Cell, command: str) -> dict:
    return {"status": "skipped", "reason": cell.skip_reason, "suite": cell.suite, "algo": cell.algo, "env": cell.env,
            "seed": cell.seed, "command": command}


def cell_result(cell: Cell, code: int, cell_wall_s: float, command: str) -> dict:
    """result.json of a cell that ran: its curve from metrics.jsonl and the final evaluation, or why it failed."""
    base = {"suite": cell.suite, "algo": cell.algo, "env": cell.env, "seed": cell.seed, "budget": cell.frames,
            "command": command, "train_command": cell.train_command(), "cell_wall_s": round(cell_wall_s, 2)}
    if code != 0:
        return {**base, "status": "failed", "exit_code": code, "error": _failure(cell.run_dir, code)}
    try:
        curve, frames, wall_s = read_curve(cell.run_dir)
    except (OSError, ValueError) as exc:
        return {**base, "status": "failed", "exit_code": code, "error": f"no metrics to read ({exc})"}
    final = _read_final_eval(cell.run_dir)
    if final is not None:
        curve.append((frames, final))
    if not curve:
        return {**base, "status": "failed", "exit_code": code,
                "error": "no deterministic evaluation finished (no final evaluation, no periodic one)"}
    return {**base, "status": "done", "final_return": curve[-1][1], "best_return": max(r for _, r in curve),
            "final_from": "final evaluation" if final is not None else "last periodic evaluation",
            "frames": frames, "wall_s": round(wall_s, 2), "curve": [[int(f), float(r)] for f, r in curve]}


def _failure(run_dir: Path, code: int) -> str:
    for name in ("error.txt", LOG_FILE):
        path = run_dir / name
        if path.is_file():
            lines = [line for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
            if lines:
                return f"exit code {code}: {lines[-1].strip()[:300]}"
    return f"exit code {code}"


def _read_final_eval(run_dir: Path) -> float | None:
    path = run_dir / FINAL_EVAL_FILE
    try:
        value = json.loads(path.read_text(encoding="utf-8")).get("return_mean") if path.is_file() else None
    except json.JSONDecodeError:
        return None
    return float(value) if _number(value) else None


def read_curve(run_dir: Path) -> tuple[list[tuple[int, float]], int, float]:
    """(frames, eval/return_mean) at each periodic evaluation, the frames trained and the training wall-clock."""
    from menger.commands.plot import continuous_wall_time, evaluation_points, load_metrics, metric_column

    records = load_metrics(run_dir)
    frames, returns = metric_column(records, "step"), evaluation_points(records)
    wall, _ = continuous_wall_time(metric_column(records, "time/wall_s"))
    curve = [(int(f), float(r)) for f, r in zip(frames, returns) if np.isfinite(f) and np.isfinite(r)]
    finite_wall = wall[np.isfinite(wall)]
    return curve, int(np.nanmax(frames)), float(finite_wall[-1]) if len(finite_wall) else float("nan")


# ---------------------------------------------------------------------------------- the cell's process (its main)
def cell_main(argv: Sequence[str]) -> int:
    """`python -m menger.commands.bench RUN_DIR/cell.json`: train (or resume) one cell, then evaluate it."""
    cell = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    run_dir = Path(cell["run_dir"])
    for name in cell["imports"]:  # registers the env id (gymnasium 1.x loads no plugins by itself)
        module, _, function = name.partition(":")
        try:
            loaded = importlib.import_module(module)
        except ImportError as exc:
            print(f"bench: {cell['env']} needs {module!r} ({exc}): {EXTRA_HINT}", file=sys.stderr)
            return 2
        if function:
            getattr(loaded, function)()
    from menger import api
    from menger.experiment import load_experiment
    from menger.runtime import StopOnSignals

    stopper = StopOnSignals()  # as `menger train`: SIGTERM (a killed bench's, `die_with_parent`) stops at a checkpoint
    try:
        if has_checkpoint(run_dir):
            api.resume(run_dir, log_lines=True, observers=[stopper], allow_import=trusted_modules(cell))
        else:
            api.run_experiment(load_experiment(cell["algo"], list(cell["overrides"])), run_dir, log_lines=True,
                               observers=[stopper])
    finally:
        stopper.restore()
    if stopper.received is not None:  # stopped short of the budget: left unfinished, the next bench resumes it
        print(f"bench: {signal.Signals(stopper.received).name}: the cell stopped with a checkpoint", file=sys.stderr)
        return 128 + stopper.received
    episodes = cell.get("final_episodes") or cell["eval_episodes"]  # cells written before the key have none
    _write_json(run_dir / FINAL_EVAL_FILE, final_evaluation(run_dir, episodes, trusted_modules(cell)))
    return 0


def trusted_modules(cell: dict) -> tuple[str, ...]:
    """The packages a cell's own run may import when it is opened again (resumed after a kill, evaluated at the
    end): its env id's (`package.module:factory`) and the suite entry's imports. The bench wrote the run, so it
    opens it with them allowed."""
    names = [cell["env"]] if ":" in cell["env"] else []
    return tuple(dict.fromkeys(name.split(":")[0].split(".")[0] for name in [*names, *cell["imports"]]))


def final_evaluation(run_dir: Path, episodes: int, allow_import: Sequence[str] = ()) -> dict:
    """Deterministic episodes of the final policy (`menger eval`), from the run's eval seed; the error if it fails
    (the bench then reports the last periodic evaluation as final). `allow_import`: the packages the run's config
    may name (`trusted_modules`)."""
    from menger.api import load_run_config
    from menger.commands.evaluate import evaluate_run

    try:
        seed = load_run_config(run_dir, allow_import).eval.seed
        return evaluate_run(run_dir, episodes=episodes, deterministic=True, seed=seed, allow_import=allow_import)
    except Exception as exc:  # noqa: BLE001 - the training is done; the bench falls back to the periodic evaluation
        return {"error": f"{type(exc).__name__}: {exc}"}


# ------------------------------------------------------------------------------------------- the table and curves
def bootstrap_interval(values: Sequence[float], level: float = 0.95, resamples: int = BOOTSTRAP_RESAMPLES,
                       seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean over seeds (a fixed rng seed: the same table every time)."""
    values = np.asarray(values, dtype=float)
    if len(values) == 0:
        return float("nan"), float("nan")
    if len(values) == 1:
        return float(values[0]), float(values[0])
    draws = np.random.default_rng(seed).integers(0, len(values), size=(resamples, len(values)))
    means = values[draws].mean(axis=1)
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def ratio(mean: float, reference: float | None, random: float | None) -> tuple[float | None, str]:
    """(mean - random) / (reference - random), "normalized"; mean / reference, "plain", without a random return;
    None without a reference, and None, "reference at random" where the reference is a random policy's return
    (a peer that learned nothing: no scale to measure against, and mean / reference would mislead)."""
    if reference is None or not math.isfinite(mean):
        return None, ""
    if random is not None:
        if reference == random:
            return None, "reference at random"
        return (mean - random) / (reference - random), "normalized"
    return (mean / reference, "plain") if reference != 0 else (None, "")


def table_rows(suite: Suite, algo: str, results: Sequence[Mapping]) -> list[dict]:
    """One row per env of the suite (in its order) that has a cell: seeds, intervals, medians, reference, ratio."""
    rows, key = [], reference_key(algo)
    for entry in suite.entries:
        cells = [r for r in results if r.get("env") == entry.id]
        if not cells:
            continue
        done = sorted((r for r in cells if r.get("status") == "done"), key=lambda r: r["seed"])
        finals = [r["final_return"] for r in done]
        bests = [r["best_return"] for r in done]
        reference = entry.reference.get(key)
        random = entry.random.value if entry.random is not None else None
        mean_final = float(np.mean(finals)) if finals else float("nan")
        value, kind = ratio(mean_final, reference.value if reference else None, random)
        rows.append({
            "env": entry.id, "seeds": [r["seed"] for r in done],
            "failed": sorted(r["seed"] for r in cells if r.get("status") == "failed"),
            "skipped": next((r.get("reason") for r in cells if r.get("status") == "skipped"), None),
            "final_mean": mean_final if finals else None, "final_ci": list(bootstrap_interval(finals)) if finals else None,
            "best_mean": float(np.mean(bests)) if bests else None,
            "best_ci": list(bootstrap_interval(bests)) if bests else None,
            "frames_median": float(np.median([r["frames"] for r in done])) if done else None,
            "wall_s_median": float(np.median([r["wall_s"] for r in done])) if done else None,
            "random": random, "random_source": _random_source(entry.random),
            "reference": reference.value if reference else None,
            "reference_algorithm": reference.algorithm if reference else None,
            "reference_frames": reference.frames if reference else None,
            "reference_source": dataclasses.asdict(reference.source) if reference else None,
            "ratio": value, "ratio_kind": kind or None})
    return rows


def _random_source(random: RandomReturn | None) -> str | None:
    if random is None:
        return None
    return random.source.url if random.source is not None else f"computed: {random.computed}"


def _fmt(value, digits: int = 4) -> str:
    return "–" if value is None or (isinstance(value, float) and not math.isfinite(value)) else f"{value:.{digits}g}"


def format_table(suite: Suite, algo: str, rows: Sequence[Mapping]) -> str:
    lines = [f"# {suite.name} / {algo}", "", suite.description.strip(), "",
             "Final: the deterministic evaluation of the policy at the end of the budget (an entry's final_episodes "
             "episodes, else as many as each periodic one); best: the best deterministic "
             "evaluation during training. Mean over seeds [95 % percentile-bootstrap interval of the mean, "
             f"{BOOTSTRAP_RESAMPLES} resamples, rng seed {BOOTSTRAP_SEED}]. Frames and wall-clock: medians over seeds.",
             "Ratio = (mean final − random) / (reference − random), normalized; where the env has no random-policy "
             "return it is mean final / reference, marked *. A missing cell stays in the table.", "",
             "| env | seeds | final | best | frames | wall s | random | reference | ratio |",
             "| --- | --- | --- | --- | ---: | ---: | ---: | --- | ---: |"]
    for row in rows:
        seeds = f"{len(row['seeds'])}" + (f" (failed: {row['failed']})" if row["failed"] else "")
        if row["skipped"]:
            seeds = f"skipped: {row['skipped']}"
        final = f"{_fmt(row['final_mean'])} [{_fmt(row['final_ci'][0])}, {_fmt(row['final_ci'][1])}]" \
            if row["final_ci"] else "–"
        best = f"{_fmt(row['best_mean'])} [{_fmt(row['best_ci'][0])}, {_fmt(row['best_ci'][1])}]" \
            if row["best_ci"] else "–"
        reference = "–"
        if row["reference"] is not None:
            at = f", {row['reference_frames']:,} frames" if row["reference_frames"] else ""
            reference = (f"{_fmt(row['reference'])} ({row['reference_algorithm'] or algo}{at}; "
                         f"[{row['reference_source']['title']}]({row['reference_source']['url']}))")
        ratio_text = _fmt(row["ratio"], 3) + ("*" if row["ratio_kind"] == "plain" else "")
        if row["ratio_kind"] == "reference at random":
            ratio_text = "– (reference at random)"
        lines.append(f"| {row['env']} | {seeds} | {final} | {best} | {_fmt(row['frames_median'])} | "
                     f"{_fmt(row['wall_s_median'])} | {_fmt(row['random'])} | {reference} | {ratio_text} |")
    return "\n".join(lines) + "\n"


def aggregate_curve(curves: Sequence[Sequence[Sequence[float]]], points: int = 50, level: float = 0.95,
                    seed: int = BOOTSTRAP_SEED) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Curves of (frames, return) per seed on one frame grid (linear interpolation, NaN outside a seed's span):
    the mean over seeds and a percentile-bootstrap band of that mean at each grid point."""
    curves = [np.asarray(c, dtype=float) for c in curves if len(c)]
    if not curves:
        empty = np.zeros(0)
        return empty, empty, empty, empty
    grid = np.linspace(min(c[0, 0] for c in curves), max(c[-1, 0] for c in curves), points)
    table = np.full((len(curves), points), np.nan)
    for row, curve in enumerate(curves):
        inside = (grid >= curve[0, 0]) & (grid <= curve[-1, 0])
        table[row, inside] = np.interp(grid[inside], curve[:, 0], curve[:, 1])
    mean, low, high = (np.full(points, np.nan) for _ in range(3))
    for column in range(points):
        values = table[:, column][np.isfinite(table[:, column])]
        if len(values):
            mean[column] = values.mean()
            low[column], high[column] = bootstrap_interval(values, level, seed=seed)
    return grid, mean, low, high


def draw_curves(suite: Suite, algo: str, results: Sequence[Mapping]):
    """One panel per env: each seed's curve (thin), the mean over seeds and its 95 % bootstrap band."""
    require("matplotlib", "plot", "the curves of `menger bench` (curves.png)")
    from matplotlib.figure import Figure
    from matplotlib.ticker import EngFormatter

    # an env the algorithm cannot act in gets no panel (the table says why); one whose cells failed gets an empty one
    envs = [e for e in suite.entries if any(r.get("env") == e.id and r.get("status") != "skipped" for r in results)]
    columns = min(3, max(1, len(envs)))
    rows = max(1, math.ceil(len(envs) / columns))
    figure = Figure(figsize=(5 * columns, 3.6 * rows))
    figure.suptitle(f"{suite.name} / {algo}: deterministic evaluation return vs env frames (mean over seeds, 95 % "
                    "bootstrap band)")
    axes_list = np.atleast_1d(figure.subplots(rows, columns, squeeze=False)).ravel()
    for axes, entry in zip(axes_list, envs):
        done = [r for r in results if r.get("env") == entry.id and r.get("status") == "done"]
        axes.set_title(entry.id, fontsize=10)
        axes.set_xlabel("env frames")
        axes.xaxis.set_major_formatter(EngFormatter())
        axes.grid(alpha=0.3)
        if not done:
            axes.text(0.5, 0.5, "no finished cell", transform=axes.transAxes, ha="center", color="gray")
            axes.set_xticks([])
            axes.set_yticks([])
            continue
        for result in done:
            curve = np.asarray(result["curve"], dtype=float)
            axes.plot(curve[:, 0], curve[:, 1], color="tab:blue", alpha=0.25, linewidth=0.8)
        grid, mean, low, high = aggregate_curve([r["curve"] for r in done])
        axes.plot(grid, mean, color="tab:blue", label=f"{algo}, {len(done)} seeds")
        axes.fill_between(grid, low, high, color="tab:blue", alpha=0.2)
        reference = entry.reference.get(reference_key(algo))
        if reference is not None:
            axes.axhline(reference.value, color="tab:green", linestyle="--", label=f"reference {reference.value:g}")
        if entry.random is not None:
            axes.axhline(entry.random.value, color="gray", linestyle=":", label=f"random {entry.random.value:g}")
        axes.legend(loc="lower right", fontsize=8)
    for axes in axes_list[len(envs):]:
        axes.set_visible(False)
    figure.tight_layout(rect=(0, 0, 1, 0.95))
    return figure


def collect_results(algo_dir: Path) -> list[dict]:
    return [r for path in sorted(algo_dir.glob(f"*/seed*/{RESULT_FILE}")) if (r := read_result(path.parent))]


def write_report(algo_dir: Path, suite: Suite | None = None, algo: str | None = None) -> dict[str, Path]:
    """table.md, table.json and curves.png of OUT/<suite>/<algo> from its finished cells (nothing trains)."""
    algo_dir = Path(algo_dir)
    meta_path = algo_dir / BENCH_FILE
    if suite is None or algo is None:
        if not meta_path.is_file():
            raise SuiteError(f"{algo_dir} holds no {BENCH_FILE}: give the OUT/<suite>/<algo> directory that "
                             "`menger bench SUITE --algo A` wrote")
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        suite = suite or load_suite(meta["suite_path"] if Path(meta["suite_path"]).is_file() else meta["suite"])
        algo = algo or meta["algo"]
    results = collect_results(algo_dir)
    if not results:
        raise SuiteError(f"no finished cell under {algo_dir} yet (no */seed*/{RESULT_FILE}); run the bench first")
    rows = table_rows(suite, algo, results)
    paths = {"table": algo_dir / "table.md", "json": algo_dir / "table.json", "curves": algo_dir / "curves.png"}
    paths["table"].write_text(format_table(suite, algo, rows), encoding="utf-8")
    _write_json(paths["json"], {"suite": suite.name, "algo": algo, "rows": rows})
    figure = draw_curves(suite, algo, results)
    partial = paths["curves"].with_name(".curves.png.partial")
    figure.savefig(partial, format="png", dpi=90)
    os.replace(partial, paths["curves"])
    return paths


def bench(suite_name: str, algo: str, *, seeds: Sequence[int], out: Path, envs: Sequence[str] = (),
          frames_scale: float = 1.0, evaluations: int | None = None, eval_episodes: int = 10,
          command: str = "", retry_failed: bool = False, published: bool = False, runner: CellRunner | None = None,
          echo: Callable[[str], None] = print) -> tuple[BenchSummary, dict[str, Path]]:
    """Plan, run what is unfinished, write the report. What `menger bench` calls."""
    suite = load_suite(suite_name)
    if algo not in suite.algos and not (is_experiment_file(algo) and _file_algorithm(algo) in suite.algos):
        echo(f"note: suite {suite.name!r} is meant for {list(suite.algos)}; running {algo} anyway")
    cells = plan_cells(suite, algo, seeds, Path(out), envs=envs, frames_scale=frames_scale,
                       evaluations=evaluations, eval_episodes=eval_episodes, published=published)
    check_imports(cells)
    algo_dir = Path(out) / suite.name / algo_folder(algo, published)
    algo_dir.mkdir(parents=True, exist_ok=True)
    _write_json(algo_dir / BENCH_FILE, {"suite": suite.name, "suite_path": str(suite.path), "algo": algo,
                                        "seeds": list(seeds), "frames_scale": frames_scale, "published_settings": published,
                                        "command": command})
    summary = run_bench(cells, runner or SubprocessCells(), command, retry_failed=retry_failed, echo=echo)
    if summary.stopped is not None and not collect_results(algo_dir):
        return summary, {}  # stopped before any cell finished: nothing to report yet
    return summary, write_report(algo_dir, suite, algo)


if __name__ == "__main__":
    sys.exit(cell_main(sys.argv[1:]))
