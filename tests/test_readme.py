"""Every command in the shell blocks of README.md and of the documentation pages that took its tour (`PAGES`)
runs as written and prints (or writes) what the page says.

Each line of a ```bash block is a command. They run in page order (`PAGES`, each page top to bottom) in one
temporary directory, so a command
that reads what an earlier one wrote (`menger place ... --out out/`, then `menger cost ... out/placement.plc`)
finds it. `menger` is `python -m menger.cli` of this checkout, `python` is this interpreter. A run directory
the README names by example (`runs/cartpole-ppo-20261130-101500`, `runs/deeprm-ppo-<time>`) is the newest one
that an earlier `menger train` of that experiment wrote.

Budgets: every `menger train` gets `TRAIN_BUDGET` (it stops after its first update), every `menger resume`
`RESUME_BUDGET`; `COMMANDS` says, per README line, what else runs smaller (and why), what is skipped (and why),
and what output the README promises. A README command with no entry runs by default: a new command that does
not work fails this test. An entry for a line the README no longer has fails it too.
"""
from __future__ import annotations

import glob
import json
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
# The README, then the site's pages whose commands it once held, in the order their commands run (a page that reads
# a run comes after the page that trains it). Commands of the other pages (chip.md, cluster.md, ...) are not run.
PAGES = (README, *(DOCS / page for page in (
    "index.md", "installation.md", "guides/runs.md",
    "algorithms/ppo.md", "algorithms/impala.md", "algorithms/appo.md", "algorithms/a3c.md", "algorithms/apex.md",
    "algorithms/gorila.md", "algorithms/r2d2.md", "algorithms/sac.md", "algorithms/pqn.md",
    "algorithms/multi-agent.md", "guides/multi-agent.md", "algorithms/alphazero.md",
    "guides/tuning.md", "guides/sizing.md", "guides/scale-out.md", "applications.md")))
SHELL_BLOCKS = ("bash", "sh", "shell", "console")
TIMEOUT_S = 240  # one command, on a loaded 2-core machine

# a train stops after its first update (then its closing checkpoint and plot); a resume trains a few more
TRAIN_BUDGET = ["--set", "stop.env_frames=1", "--set", "stop.target_return=null", "--set", "checkpoint.interval_s=0"]
RESUME_BUDGET = ["--set", "stop.env_frames=4000"]
EXAMPLE_RUN = re.compile(r"runs/([A-Za-z0-9_.-]+?)-(?:\d{8}-\d{6}|<time>)")


@dataclass
class Ran:
    """A finished command: what ran, in which directory, its exit code and output."""

    argv: list[str]
    cwd: Path
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def run_dir(self) -> Path:
        """The run directory `menger train` / `resume` printed (`results: RUN_DIR  (...)`)."""
        match = re.search(r"^results: (\S+)", self.stdout, re.MULTILINE)
        assert match, f"no 'results:' line in the output:\n{self.stdout[-2000:]}"
        return self.cwd / match.group(1)


@dataclass(frozen=True)
class Entry:
    """What the test does with one README line: `skip` (why), or run `run` (the line itself when None) with
    `extra` arguments appended after the default budget, then `check` what the README says it prints."""

    why: str
    skip: bool = False
    run: str | None = None
    extra: tuple[str, ...] = ()
    check: Callable[[Ran], None] | None = None


# ----- what the README promises ---------------------------------------------------------------------------
RUN_FILES = ("config.yaml", "metrics.jsonl", "checkpoints", "plot.png")  # "A run directory holds ..."


def trained(ran: Ran) -> None:
    """`menger train` prints where its results and plot are; the run directory holds what the README lists."""
    run = ran.run_dir()
    missing = [name for name in RUN_FILES if not (run / name).exists()]
    assert not missing, f"{run} lacks {missing}"
    assert any((run / "checkpoints").iterdir()), f"{run}/checkpoints is empty"
    assert re.search(r"^plot: +\S+plot\.png", ran.stdout, re.MULTILINE), "no 'plot:' line naming plot.png"


def listed_presets(ran: Ran) -> None:
    names = {line.split()[0] for line in ran.stdout.splitlines() if line.strip()}
    promised = {"cartpole-ppo", "cartpole-impala", "cartpole-apex", "pendulum-sac"}  # the README's comment
    assert promised <= names, f"menger presets lacks {promised - names}"
    trainable = {match.group(1) for page in PAGES for match in re.finditer(r"menger train ([a-z0-9-]+)\b",
                                                                          page.read_text())}
    assert trainable - {"my-exp"} <= names, f"the docs train presets that do not ship: {trainable - names}"


def evaluated_with_video(ran: Ran) -> None:
    assert re.search(r"episodes: 2 +mean return: -?\d", ran.stdout), ran.stdout
    video = re.search(r"^video: (\S+)", ran.stdout, re.MULTILINE)
    assert video and (ran.cwd / video.group(1)).stat().st_size > 1000, "no eval.gif written"


def plotted(ran: Ran) -> None:
    png = ran.cwd / ran.stdout.strip().splitlines()[-1]
    assert png.name == "plot.png" and png.stat().st_size > 1000, ran.stdout


def exported(ran: Ran) -> None:
    """policy.pt: torch.jit.load(...)(obs) -> actions, no Menger needed (in a Python that never imports it)."""
    path = re.search(r"^wrote (\S+):", ran.stdout, re.MULTILINE).group(1)
    code = ("import sys, torch; assert 'menger' not in sys.modules; policy = torch.jit.load(sys.argv[1]); "
            "actions = policy(torch.zeros(3, 4)); assert actions.shape == (3,), actions.shape; print('ok')")
    done = subprocess.run([sys.executable, "-c", code, path], cwd=ran.cwd, capture_output=True, text=True,
                          timeout=120, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert done.stdout.strip() == "ok", done.stderr


def described(ran: Ran) -> None:
    for key in ("ppo.lr", "runtime.envs_per_actor", "stop.env_frames"):
        assert key in ran.stdout, f"`menger config` does not describe {key}"


def effective_config(ran: Ran) -> None:
    import yaml

    config = yaml.safe_load(ran.stdout)
    assert config["name"] == "cartpole-ppo" and config["ppo"]["lr"] == pytest.approx(3e-4), config.get("ppo")


def tuned(ran: Ran) -> None:
    """`menger tune` prints every trial and the best one, and keeps the study beside them."""
    study = re.search(r"^study: +(\S+study\.db)", ran.stdout, re.MULTILINE)
    assert study and (ran.cwd / study.group(1)).exists(), ran.stdout
    assert re.search(r"^best: trial \d+", ran.stdout, re.MULTILINE), ran.stdout


def populated(ran: Ran) -> None:
    """`menger tune --population` prints each generation and the best member, and writes the lineage beside it."""
    lineage = re.search(r"^lineage: +(\S+lineage\.jsonl), (\S+lineage\.png)", ran.stdout, re.MULTILINE)
    assert lineage and (ran.cwd / lineage.group(1)).exists() and (ran.cwd / lineage.group(2)).exists(), ran.stdout
    assert re.search(r"^generation 1: ", ran.stdout, re.MULTILINE), ran.stdout
    best = re.search(r"^best: +member \d+ .* -> (\S+)", ran.stdout, re.MULTILINE)
    assert best and (ran.cwd / best.group(1) / "config.yaml").exists(), ran.stdout


def placed(ran: Ran) -> None:
    out = ran.cwd / "out"
    assert (out / "placement.plc").exists(), sorted(p.name for p in out.iterdir())
    assert list(out.glob("*.png")), "no PNG of the placement"
    for word in ("wirelength", "density", "congestion"):
        assert word in ran.stdout.lower(), f"the costs lack {word}"


def costed(ran: Ran) -> None:
    for word in ("wirelength", "density", "congestion"):
        assert word in ran.stdout.lower(), f"`menger cost` does not print {word}"
    assert "legal: hard macros inside the canvas" in ran.stdout, ran.stdout  # what `menger place` wrote is legal


def scheduled(*policies: str) -> Callable[[Ran], None]:
    def check(ran: Ran) -> None:
        for policy in policies:
            assert policy in ran.stdout, f"no figure for {policy}"
    return check


def matched(games: int) -> Callable[[Ran], None]:
    """`menger match` prints the seats and the total (or one JSON line) of all its games."""
    def check(ran: Ran) -> None:
        if ran.stdout.lstrip().startswith("{"):
            import json

            report = json.loads(ran.stdout)
            assert report["games"] == games and set(report["seats"]) == {"player_0", "player_1"}, report
        else:
            total = re.search(r"^total +(\d+) ", ran.stdout, re.MULTILINE)
            assert total and int(total.group(1)) == games and "player_1" in ran.stdout, ran.stdout
    return check


def leagued(ran: Ran) -> None:
    """A league run: one ordinary run directory per learner, and the league's state beside them."""
    run = ran.run_dir()
    assert (run / "league" / "state.json").exists(), "no league/state.json"
    system = json.loads((run / "system.json").read_text())  # what it ran on, as an ordinary run records it
    assert system["packages"]["menger"] and "train" in system["command"], system
    players = sorted(p.name for p in (run / "players").iterdir())
    assert players == ["league_exploiter_0", "main_0", "main_exploiter_0"], players
    for name in players:
        assert list((run / "players" / name / "checkpoints").iterdir()), f"{name} has no checkpoint"


def ranked(ran: Ran) -> None:
    assert "Elo" in ran.stdout and "main_0" in ran.stdout, ran.stdout
    assert re.search(r"payoff: \S+payoff\.png", ran.stdout), ran.stdout


def swept(ran: Ran) -> None:
    sweep = ran.cwd / "sweep"
    assert list(sweep.glob("*.png")) and list(sweep.glob("*.csv")), "the sweep wrote no PNG and CSV"


RAY_SKIP = ("starts a Ray instance (20-40 s here before the first step); tests/ray/test_ray_launcher.py trains "
            "through --launcher ray")
PONG = ["--set", "runtime.envs_per_actor=4"]  # ALE envs take long to start here

COMMANDS: dict[str, Entry] = {
    "menger tune cartpole-ppo --search optuna --trials 12 --set stop.env_frames=100000": Entry(
        "3 trials of 2,048 frames each, on threads, not 12 of 100k",
        run="menger tune cartpole-ppo --search optuna --trials 3 --set stop.env_frames=2048 --set "
            "runtime.launcher=threads --set checkpoint.interval_s=0 --set log.tensorboard=false --out tune-out",
        check=tuned),
    "menger tune cartpole-ppo --population 4 --ready 8192 --set 'tune={ppo.lr: {log_uniform: [1.0e-5, 1.0e-1]}}'":
        Entry("2 members on threads, 2 generations of 128 frames, not 4 members to the target",
              run="menger tune cartpole-ppo --population 2 --ready 128 --set 'tune={ppo.lr: {log_uniform: "
                  "[1.0e-5, 1.0e-1]}}' --set stop.env_frames=256 --set runtime.launcher=threads --set "
                  "runtime.envs_per_actor=4 --set runtime.unroll_length=16 --set checkpoint.interval_s=0 "
                  "--set log.tensorboard=false --out pbt-out",
              check=populated),
    "make train": Entry("creates .venv and trains to 475 (minutes): only checked to be a make target",
                        run="make -n train"),
    "make test": Entry("the whole suite (minutes): only checked to be a make target", run="make -n test"),
    "menger presets": Entry("", check=listed_presets),
    "menger train pendulum-sac": Entry("an evaluation of 1 episode, not 10, each second",
                                       extra=("--set", "eval.episodes=1")),
    "menger train ppo --set env.id=Acrobot-v1 --set stop.env_frames=300000": Entry("", check=trained),
    "menger train pong-impala --actors 2 --envs-per-actor 16": Entry(
        "ALE: 4 envs per actor, not 16 (16 ALE envs take long to start here)",
        extra=tuple(PONG), check=trained),
    "menger train pong-impala": Entry("the preset's own sizes are --actors 2 --envs-per-actor 16: the command "
                                      "above, which runs", skip=True),
    "menger train pong-apex": Entry("ALE from replay: 4 envs per actor, a replay of 2048 steps that learns from "
                                    "256 (not 100k and 20k), an evaluation of 1 episode",
                                    extra=(*PONG, "--set", "replay.max_size=2048", "--set", "replay.min_size=256",
                                           "--set", "eval.episodes=1")),
    "menger train pong-r2d2": Entry("ALE, recurrent replay: 2 envs per actor, learning from 16 sequences (not "
                                    "200), an evaluation of 1 episode",
                                    extra=("--set", "runtime.envs_per_actor=2", "--set", "replay.min_size=16",
                                           "--set", "eval.episodes=1")),
    "menger resume runs/cartpole-ppo-20261130-101500 --set stop.env_frames=1000000": Entry("", check=trained),
    "menger eval runs/cartpole-ppo-20261130-101500 --episodes 20 [--video]": Entry(
        "2 episodes; the optional [--video] is given", run="menger eval runs/cartpole-ppo-20261130-101500 "
        "--episodes 2 --video", check=evaluated_with_video),
    "menger plot runs/cartpole-ppo-20261130-101500": Entry("", check=plotted),
    "menger export runs/cartpole-ppo-20261130-101500": Entry("", check=exported),
    "menger config": Entry("", check=described),
    "menger config cartpole-ppo --set ppo.lr=3e-4": Entry("", check=effective_config),
    "tensorboard --logdir runs": Entry("a server that runs until it is stopped", skip=True),
    'pip install -e ".[ray]"': Entry("installs packages", skip=True),
    'pip install "menger-rl[wandb]"': Entry("installs packages", skip=True),
    "menger train cartpole-ppo --set log.wandb.project=my-project": Entry(
        "needs wandb, an optional extra the tests do not install; tests/runtime/test_run_logging.py drives the "
        "W&B logger with a fake wandb module", skip=True),
    "menger train cartpole-impala --launcher ray": Entry(RAY_SKIP, skip=True),
    "menger train pong-impala --launcher ray --address auto --actors 64": Entry("needs a running Ray cluster",
                                                                                skip=True),
    "menger train cartpole-apex --launcher ray --set replay.shards=2": Entry(RAY_SKIP, skip=True),
    "menger place ariane133_ng45 --method rl --budget 600 --out out/": Entry(
        "a budget of 5 s, not 600", run="menger place ariane133_ng45 --method rl --budget 5 --out out/",
        check=placed),
    "menger cost ariane133_ng45 out/placement.plc": Entry("", check=costed),
    "menger train connect4-selfplay --run-dir runs/c4": Entry("", check=trained),
    "menger match runs/c4 --opponent alphabeta:4 --games 400": Entry(
        "20 games, not 400", run="menger match runs/c4 --opponent alphabeta:4 --games 20", check=matched(20)),
    "menger league runs/c4": Entry("", check=ranked),
    "menger train wargame-mappo --run-dir runs/wargame": Entry("", check=trained),
    "menger match runs/wargame --opponent bot:focus-fire --games 200 --seed 100000": Entry(
        "4 games, not 200", run="menger match runs/wargame --opponent bot:focus-fire --games 4 --seed 100000"),
    "menger train connect4-league --run-dir runs/c4-league": Entry("", check=leagued),
    "menger match runs/c4-league --policy main_exploiter_0 --opponent runs/c4 --stochastic --games 100": Entry(
        "10 games, not 100",
        run="menger match runs/c4-league --policy main_exploiter_0 --opponent runs/c4 --stochastic --games 10",
        check=matched(10)),
    "menger match runs/c4 --opponent openspiel:mcts:400 --games 200 --seed 100000": Entry(
        "4 games against 100 simulations, not 200 against 400",
        run="menger match runs/c4 --opponent openspiel:mcts:100 --games 4 --seed 100000", check=matched(4)),
    "menger match runs/c4 --opponent openspiel:mcts:400 --games 200 --seed 100000 --search 400": Entry(
        "2 games searching 50 simulations against 100, not 200 searching 400 against 400",
        run="menger match runs/c4 --opponent openspiel:mcts:100 --games 2 --seed 100000 --search 50",
        check=matched(2)),
    "menger match runs/connect4-alphazero-<time> --opponent openspiel:mcts:400 --games 200 --seed 100000 --search 400":
        Entry("2 games searching 20 simulations against 50, not 200 searching 400 against 400",
              run="menger match runs/connect4-alphazero-<time> --opponent openspiel:mcts:50 --games 2 --seed 100000 "
                  "--search 20", check=matched(2)),
    "menger match alphabeta:4 --env pettingzoo.classic.connect_four_v3:env --opponent random --games 400": Entry(
        "", check=matched(400)),
    "menger match alphabeta:4 --env pettingzoo.classic.connect_four_v3:env --opponent alphabeta:1 --games 100 --json":
        Entry("", check=matched(100)),
    "menger schedule --policy sjf --policy packer --load 0.9 --episodes 200 --env num_slots=10": Entry(
        "3 episodes, not 200", run="menger schedule --policy sjf --policy packer --load 0.9 --episodes 3 --env "
        "num_slots=10", check=scheduled("sjf", "packer")),
    "menger schedule --policy runs/deeprm-ppo-<time> --policy sjf --policy packer --load 1.3 --episodes 200": Entry(
        "3 episodes, not 200", run="menger schedule --policy runs/deeprm-ppo-<time> --policy sjf --policy packer "
        "--load 1.3 --episodes 3", check=scheduled("sjf", "packer")),
    "menger schedule --sweep-load 0.1:1.9:0.2 --out sweep/": Entry(
        "2 episodes per load", extra=("--episodes", "2"), check=swept),
}


# ----- reading the README ---------------------------------------------------------------------------------
def documented_commands() -> list[str]:
    """Every command of `PAGES`, in the order they run."""
    return [command for page in PAGES for command in readme_commands(page.read_text())]


def readme_commands(text: str) -> list[str]:
    """Every command line of the shell blocks, in order: comments and blank lines dropped, `\\` continued."""
    commands, block, pending = [], None, ""
    for line in text.splitlines():
        fence = re.match(r"^\s*```\s*(\S*)", line)
        if fence:
            block = None if block is not None else fence.group(1).lower()
            continue
        if block not in SHELL_BLOCKS:
            continue
        line = _without_comment(line).strip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = (pending + line).strip(), ""
        if line:
            commands.append(" ".join(line.split()))
    return commands


def _without_comment(line: str) -> str:
    """The line up to a `#` that starts a shell comment (after whitespace, outside quotes)."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def _argv(command: str, cwd: Path) -> list[str]:
    """The README's command as this checkout runs it: menger -> python -m menger.cli, example runs resolved."""
    def newest_run(match: re.Match) -> str:
        runs = sorted(glob.glob(str(cwd / "runs" / f"{match.group(1)}-*")))
        assert runs, f"{command!r} reads a run of {match.group(1)} that no earlier README command wrote"
        return str(Path(runs[-1]).relative_to(cwd))

    argv = shlex.split(EXAMPLE_RUN.sub(newest_run, command))
    if argv[0] == "menger":
        argv = [sys.executable, "-m", "menger.cli", *argv[1:]]
        if argv[3:4] == ["train"]:
            argv += TRAIN_BUDGET
        elif argv[3:4] == ["resume"]:
            argv += RESUME_BUDGET
    elif argv[0] == "python":
        argv[0] = sys.executable
    elif argv[0] == "make":  # the README's make runs in the checkout
        argv[1:1] = ["-C", str(ROOT)]
    return argv


def _environment() -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "MPLBACKEND": "Agg"}


def run_command(command: str, entry: Entry | None, cwd: Path) -> Ran:
    argv = _argv(entry.run if entry and entry.run else command, cwd) + list(entry.extra if entry else ())
    started = time.monotonic()
    done = subprocess.run(argv, cwd=cwd, env=_environment(), capture_output=True, text=True, timeout=TIMEOUT_S)
    return Ran(argv, cwd, done.returncode, done.stdout, done.stderr, time.monotonic() - started)


# ----- the tests ------------------------------------------------------------------------------------------
def test_the_readme_has_commands_and_the_table_names_only_readme_lines():
    assert "menger presets" in readme_commands(README.read_text()), "the README's quick start lists the presets"
    commands = documented_commands()
    assert len(commands) > 20
    stale = sorted(set(COMMANDS) - set(commands))
    assert not stale, f"COMMANDS has entries for lines no page of PAGES has any more (update them): {stale}"
    assert all(entry.why for entry in COMMANDS.values() if entry.skip or entry.run or entry.extra), \
        "every skip and every smaller budget says why"


def test_readme_commands_are_read_as_a_shell_reads_them():
    text = "x\n```bash\nmenger a  --b 1   # a comment\n\n# only a comment\nmenger c \\\n  --d '#e'\n```\n" \
           "```yaml\nname: x\n```\n"
    assert readme_commands(text) == ["menger a --b 1", "menger c --d '#e'"]


def test_every_command_that_reads_a_run_comes_after_the_command_that_writes_it():
    """The slow test runs the commands in order in one directory: `menger eval runs/cartpole-ppo-<time>` needs a
    `menger train cartpole-ppo` before it, `menger match runs/c4` a `--run-dir runs/c4`, on this page or an
    earlier one of PAGES."""
    written, unmet = set(), []
    for command in dict.fromkeys(documented_commands()):
        argv = shlex.split(command)
        if argv[:2] == ["menger", "train"] and len(argv) > 2:
            written.add(argv[2])
            written.update(argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == "--run-dir")
        named = [match.group(1) for match in EXAMPLE_RUN.finditer(command)]
        named += [arg for arg in argv[2:] if re.fullmatch(r"runs/[A-Za-z0-9_.-]+", arg) and not EXAMPLE_RUN.match(arg)]
        unmet += [f"{command!r} reads {run}" for run in named if run not in written]
    assert not unmet, "commands that read a run no earlier command of PAGES writes (reorder PAGES or the " \
                      f"page): {unmet}"


def test_every_page_of_pages_exists_and_holds_commands():
    empty = [str(page.relative_to(ROOT)) for page in PAGES if not page.exists() or not readme_commands(page.read_text())]
    assert not empty, f"PAGES names pages that are missing or hold no shell command: {empty}"


@pytest.mark.slow
def test_every_readme_command_runs_and_prints_what_the_readme_says(tmp_path):
    commands = list(dict.fromkeys(documented_commands()))  # a command the pages repeat runs once
    failures, timings = [], []
    for command in commands:
        entry = COMMANDS.get(command)
        if entry is not None and entry.skip:
            print(f"skipped: {command}  ({entry.why})")
            continue
        try:
            ran = run_command(command, entry, tmp_path)
        except (AssertionError, subprocess.TimeoutExpired) as exc:
            failures.append(f"{command}: {exc}")
            continue
        timings.append((ran.seconds, command))
        if ran.returncode != 0:
            failures.append(f"{command}: exit code {ran.returncode}\n{ran.stderr[-1500:]}")
            continue
        check = entry.check if entry and entry.check else (trained if command.startswith("menger train ") else None)
        try:
            if check is not None:
                check(ran)
        except AssertionError as exc:
            failures.append(f"{command}: {exc}")
    for seconds, command in sorted(timings, reverse=True):
        print(f"{seconds:6.1f} s  {command}")
    print(f"{sum(s for s, _ in timings):.0f} s for {len(timings)} commands")
    assert not failures, "README commands that do not work as written:\n\n" + "\n\n".join(failures)


def test_a_command_without_an_entry_runs_with_the_default_budget_and_can_fail(tmp_path):
    """Nothing is skipped unless the table says so: a README line that does not work fails the slow test."""
    assert _argv("menger train cartpole-ppo", tmp_path)[-len(TRAIN_BUDGET):] == TRAIN_BUDGET
    ran = run_command("menger trian cartpole-ppo", None, tmp_path)
    assert ran.returncode != 0 and "invalid choice: 'trian'" in ran.stderr


# ----- the generic presets learn as written -------------------------------------------------------------------
# A README line that trains a generic preset on an env it was not tuned on runs here as written, with no budget of
# the test's, and must reach the threshold: (the metric the stop rule reads, its threshold).
LEARNS_AS_WRITTEN = {
    "menger train apex --set env.id=Acrobot-v1 --set stop.target_return=-100": ("eval/return_mean", -100.0),
    "menger train ppo --set env.id=Acrobot-v1 --set stop.env_frames=300000": ("episode/return_mean", -120.0),
    # the training return of an async run, its last episodes: -101 to -132 across runs here; -349 with rewards raw
    "menger train impala --set env.id=Acrobot-v1 --set stop.env_frames=200000": ("episode/return_mean", -200.0),
    # an async parameter server: -97 to -109 at the end here (a core kept busy beside it); -96 to -129 at 200k frames,
    # which CI once missed; -500 with rewards raw (the scale reaches the actor-learners)
    "menger train a3c --set env.id=Acrobot-v1 --set stop.env_frames=300000": ("episode/return_mean", -120.0),
    # MuJoCo: the greedy evaluation first balanced all 1,000 steps after 11.9k to 15.4k frames here (seeds 1-3)
    "menger train sac --set env.id=InvertedPendulum-v5 --set stop.target_return=1000 --set stop.env_frames=30000":
        ("eval/return_mean", 1000.0),
    # sequences from a replay on a fully observed task: -96 to -140 from 400k to 520k frames here, -93 at 1M
    "menger train r2d2 --set env.id=Acrobot-v1 --set stop.env_frames=500000": ("episode/return_mean", -200.0),
}


def test_every_generic_learning_line_is_in_the_readme():
    commands = documented_commands()
    assert not set(LEARNS_AS_WRITTEN) - set(commands), "LEARNS_AS_WRITTEN names lines no page of PAGES has any more"


@pytest.mark.slow
@pytest.mark.parametrize("command", list(LEARNS_AS_WRITTEN),  # pytest names longer ids than 100 characters by index
                         ids=[command.removeprefix("menger train ") for command in LEARNS_AS_WRITTEN])
def test_the_readmes_generic_lines_learn_as_written(command, tmp_path):
    import json

    metric, threshold = LEARNS_AS_WRITTEN[command]
    argv = [sys.executable, "-m", "menger.cli", *shlex.split(command)[1:], "--seed", "1", "--no-progress"]
    done = subprocess.run(argv, cwd=tmp_path, env=_environment(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    run = Ran(argv, tmp_path, done.returncode, done.stdout, done.stderr, 0.0).run_dir()
    values = [row[metric] for row in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
              if row.get(metric) is not None]
    assert values and values[-1] >= threshold, f"{command}: {metric} ended at {values[-1:]}, below {threshold}"
