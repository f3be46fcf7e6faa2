"""`menger`: train | resume | tune | eval | match | plot | bench | league | presets | config | completion, and the
applications' place | cost | schedule | schedule-gpus."""
from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

# commands that start training runs: they fork actors and learner ranks, so they run on Linux only (README, Platforms)
LINUX_ONLY = ("train", "resume", "tune", "bench")
APP_COMMANDS = {
    "place": ("menger.apps.chip.commands", "place_main", "place a netlist's macros (rl, sa, greedy, random)"),
    "cost": ("menger.apps.chip.commands", "cost_main", "proxy costs of a placement: wirelength, density, congestion"),
    "schedule": ("menger.apps.cluster.commands", "schedule_main", "evaluate cluster schedulers; sweep the load"),
    "schedule-gpus": ("menger.apps.gpucluster.commands", "schedule_gpus_main",
                      "GPU-sharing schedulers (FGD and others) on a production trace"),
}


def _version() -> str:
    from menger import __version__

    return __version__


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="menger", description="Distributed deep RL: actors, learners, a parameter "
                                     "server; one laptop or a cluster.")
    parser.add_argument("--version", action="version", version=f"menger {_version()}")
    parser.add_argument("--debug", action="store_true", help="on a failure, print the traceback too (anywhere on "
                        "the command line; or MENGER_DEBUG=1); without it a failure is one short message, and a run "
                        "that failed keeps the traceback in RUN_DIR/error.txt")
    sub = parser.add_subparsers(dest="command", required=True)

    train = sub.add_parser("train", help="train a preset or an experiment file")
    train.add_argument("experiment", nargs="?", help="a preset name (see `menger presets`) or a YAML file (optional "
                       "with --algo)")
    train.add_argument("--algo", dest="algorithm", metavar="NAME", help="without an experiment: train the algorithm's generic preset "
                       "(menger train --algo ppo --env Acrobot-v1); with one: check that it trains NAME")
    train.add_argument("--env", metavar="ID", help="the env to train on (env.id): a Gymnasium id or "
                       "package.module:factory")
    train.add_argument("--frames", type=_frames, metavar="N", help="env frames to train for (stop.env_frames): "
                       "200000, 2e5, 200k or 1M")
    train.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                       help="override any config key, e.g. --set ppo.lr=1e-3 (repeatable)")
    train.add_argument("--launcher", choices=["threads", "processes", "ray"],
                       help="where actors run (runtime.launcher): threads or processes on this machine, or Ray actors")
    train.add_argument("--address", help="ray: 'auto' or HOST:PORT of a running cluster (default: a private local "
                       "Ray instance for this run)")
    train.add_argument("--actors", type=_count_or_auto, help="number of actors, or auto (runtime.actors)")
    train.add_argument("--envs-per-actor", type=_count_or_auto, help="envs each actor steps as one batch, or auto "
                       "(runtime.envs_per_actor)")
    train.add_argument("--learners", type=int, help="data-parallel learners (torch.distributed)")
    seeding = train.add_mutually_exclusive_group()
    seeding.add_argument("--seed", type=int, help="seed of everything (runtime.seed)")
    seeding.add_argument("--seeds", type=int, nargs="+", metavar="SEED", help="train once per seed, each run in "
                         "RUN_DIR/seed-SEED, then print each seed's final return with the mean and its 95%% interval "
                         "and write RUN_DIR/plot.png (mean and band); see --parallel")
    train.add_argument("--parallel", type=int, default=1, metavar="N", help="--seeds: train N seeds at once, each "
                       "in its own processes, its output in RUN_DIR/seed-SEED.log (default 1: one after another)")
    train.add_argument("--run-dir", help="where results go (default runs/NAME-TIME; with --seeds the parent of one "
                       "directory per seed)")
    train.add_argument("--no-progress", action="store_true", help="plain log lines instead of the live display "
                       "(also what a log file or a pipe gets)")
    train.add_argument("--supervise", type=int, nargs="?", const=3, metavar="RESTARTS",
                       help="train in a child process and, if it dies (killed by a signal: SIGKILL, the OOM killer, "
                       "a segfault), resume it from its newest checkpoint, up to RESTARTS times (default 3)")

    res = sub.add_parser("resume", help="continue a run from its newest valid checkpoint (or --checkpoint)")
    res.add_argument("run_dir")
    _checkpoint_option(res, "go on from; a checkpoint older than the newest rewinds the run to it (the newer ones "
                       "move to RUN_DIR/checkpoints/rewound-TIME/, kept)")
    res.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                     help="e.g. --set stop.env_frames=2000000 to train further")
    res.add_argument("--no-progress", action="store_true", help="plain log lines instead of the live display")
    res.add_argument("--allow-import", action="append", default=[], metavar="MODULE",
                     help="a module outside Menger that the run's config may import (its env or network); a run "
                     "directory is data, so nothing else is imported from it (repeatable)")

    tu = sub.add_parser("tune", help="tune the experiment's `tune:` keys: population-based training "
                        "(--population N) or a search on Optuna (--search optuna --trials N)")
    tu.add_argument("experiment", help="a preset name or a YAML file with a `tune:` section")
    how = tu.add_mutually_exclusive_group(required=True)
    how.add_argument("--population", type=int, metavar="N", help="population-based training: N members train at "
                     "once; at every --ready frames the bottom --quantile copies a top member and perturbs its values")
    how.add_argument("--search", choices=["optuna"], help="the search: optuna (TPE sampling, median pruning on the "
                     "learning curve, the study in OUT/study.db so it resumes)")
    tu.add_argument("--trials", type=int, help="--search: trials to finish (completed or pruned) in all")
    tu.add_argument("--out", help="the tune directory (default runs/NAME-tune-TIME); give an existing one to go on")
    tu.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override any config key for every trial or member, e.g. --set stop.env_frames=200000, or "
                    "the search space: --set 'tune.ppo.lr={log_uniform: [1.0e-4, 1.0e-2]}'")
    tu.add_argument("--metric", help="what a trial or member is scored on (default: episode/return_mean; "
                    "eval/return_mean for apex, gorila, r2d2, sac)")
    tu.add_argument("--direction", choices=["maximize", "minimize"], default="maximize",
                    help="whether a larger or a smaller --metric is better")
    tu.add_argument("--seed", type=int, default=0, help="the sampler's (or the population's draws') seed")
    tu.add_argument("--ready", type=int, metavar="FRAMES", help="--population: env frames per member between "
                    "exploits (default: a twentieth of stop.env_frames)")
    tu.add_argument("--quantile", type=float, default=0.25, help="--population: the share of members that copy, "
                    "and the share copied from (default 0.25)")
    tu.add_argument("--resample", type=float, default=0.25, help="--population: the chance a copied value is "
                    "drawn anew instead of multiplied by 0.8 or 1.2 (default 0.25)")
    tu.add_argument("--on", choices=["processes", "ray"], default="processes", help="--population: members as "
                    "processes on this machine, or as Ray actors on the cluster RAY_ADDRESS names (default processes)")
    tu.add_argument("--member-cpus", type=float, default=1.0, help="--on ray: CPUs each member reserves")

    ev = sub.add_parser("eval", help="run a trained policy")
    ev.add_argument("run_dir")
    ev.add_argument("--episodes", type=int, help="episodes to play, one after another (default 10; a multi-agent game "
                    "counts one per learned agent and plays whole games)")
    ev.add_argument("--stochastic", action="store_true", help="sample actions instead of taking the most likely")
    ev.add_argument("--video", action="store_true", help="also play one episode on an env that renders and write "
                    "its rgb_array frames as RUN_DIR/eval.mp4 (the env's own picture at its own resolution; Atari: the "
                    "210x160 colour screen)")
    ev.add_argument("--video-format", choices=("mp4", "gif"), help="the video's format (default: the --video-out "
                    "suffix, else mp4)")
    ev.add_argument("--video-out", metavar="PATH", help="where to write the video (default RUN_DIR/eval.FORMAT)")
    ev.add_argument("--seed", type=int, help="seed of the env (default 12345)")
    _checkpoint_option(ev, "play")
    ev.add_argument("--like-training", action="store_true", help="play the run's own evaluation episodes instead: "
                    "eval.episodes envs side by side from eval.seed, deterministic actions, as the evaluator did "
                    "during training; the mean return is then the eval/return_mean recorded for the same parameters "
                    "(the default with --checkpoint best, unless --episodes, --seed or --stochastic is given)")
    ev.add_argument("--allow-import", action="append", default=[], metavar="MODULE",
                    help="a module outside Menger that the run's config may import (its env or network) (repeatable)")

    ma = sub.add_parser("match", help="play a run or a bot against an opponent for N games of a PettingZoo game, "
                        "from both seats: wins, draws, losses with 95%% intervals")
    ma.add_argument("player", metavar="RUN", help="a run directory, or a bot: random, alphabeta:DEPTH, bot:NAME, "
                    "package.module:Factory")
    ma.add_argument("--policy", help="which policy of the run plays (default: its main one)")
    ma.add_argument("--opponent", required=True, help="random, alphabeta:DEPTH (Connect Four), bot:NAME (the env's "
                    "own bots), a run directory RUN2, or package.module:Factory (an object with act(observation, "
                    "action_mask); needs --allow-import)")
    ma.add_argument("--games", type=int, default=100, metavar="N", help="games to play (default 100); the player "
                    "takes each seat in turn")
    ma.add_argument("--env", help="the PettingZoo env, package.module:factory or a PettingZoo registry id (default: "
                    "the run's env), e.g. pettingzoo.classic.connect_four_v3:env or classic/connect_four-v3")
    ma.add_argument("--seed", type=int, default=0, help="game g resets the env with seed + g")
    ma.add_argument("--search", type=int, default=0, metavar="N", help="the player (a run) plays through PUCT tree "
                    "search with its network's prior and value, N simulations a move (Connect Four, Tic-Tac-Toe)")
    ma.add_argument("--opponent-search", type=int, default=0, metavar="N", help="the opponent (a run) searches too")
    ma.add_argument("--rollouts", type=float, default=0.0, metavar="W", help="the searches value each new leaf as "
                    "(1 - W) x the network's value + W x a random playout's outcome (AlphaGo's mixed evaluation; "
                    "default 0: the network's value alone, as AlphaZero)")
    acting = ma.add_mutually_exclusive_group()
    acting.add_argument("--stochastic", action="store_const", const=True, default=None, help="runs sample their "
                        "actions (seeded by --seed) instead of taking the most likely: two deterministic runs would "
                        "play the same game in each seat (default: each run's env.multiagent.match_actions)")
    acting.add_argument("--most-likely", dest="stochastic", action="store_const", const=False, help="runs take "
                        "their most likely action, whatever their env.multiagent.match_actions says")
    ma.add_argument("--json", action="store_true", help="print one JSON line instead of the table")
    ma.add_argument("--allow-import", action="append", default=[], metavar="MODULE",
                    help="a module outside Menger that a player, an opponent or the run's config may import "
                    "(repeatable)")

    ex = sub.add_parser("export", help="write a trained policy as one file that runs with torch or onnxruntime alone")
    ex.add_argument("run_dir")
    ex.add_argument("--format", default="torchscript", help="torchscript (runs with torch) or onnx (runs with "
                    "onnxruntime; needs pip install \"menger-rl[export]\")")
    ex.add_argument("--out", help="where to write it (default RUN_DIR/policy.pt, RUN_DIR/policy.onnx)")
    _checkpoint_option(ex, "export")
    ex.add_argument("--allow-import", action="append", default=[], metavar="MODULE",
                    help="a module outside Menger that the run's config may import (its env or network) (repeatable)")

    be = sub.add_parser("bench", help="train a generic preset on every env of a suite, seed by seed; a table against "
                        "published references and learning curves (resumable: run the same command again)")
    be.add_argument("suite", nargs="?", help="a suite name (menger/commands/suites/NAME.yaml) or a suite file")
    be.add_argument("--algo", help="the generic preset to train: ppo, apex, sac, r2d2, impala, a3c, marl, ...")
    seeds = be.add_mutually_exclusive_group()
    seeds.add_argument("--seeds", type=int, default=3, metavar="N", help="seeds 1..N (default 3)")
    seeds.add_argument("--seed-list", type=int, nargs="+", metavar="SEED", help="these seeds instead")
    be.add_argument("--out", default="runs/bench", help="where cells go: OUT/SUITE/ALGO/ENV/seedK (default runs/bench)")
    be.add_argument("--envs", nargs="+", metavar="ID", default=[], help="only these envs of the suite")
    be.add_argument("--frames-scale", type=float, default=1.0, metavar="X", help="multiply every frame budget by X")
    be.add_argument("--evaluations", type=int, metavar="N", help="deterministic evaluations per cell, evenly spaced "
                    "in env frames (default: the suite's evaluations, 20)")
    be.add_argument("--eval-episodes", type=int, default=10, help="episodes per evaluation (default 10)")
    be.add_argument("--retry-failed", action="store_true", help="train failed cells again instead of keeping them")
    be.add_argument("--published-settings", action="store_true", help="apply the suite's published per-env settings "
                    "of the algorithm (rl-zoo's, named in the suite file) on top of the generic preset; cells go to "
                    "OUT/SUITE/ALGO+published")
    be.add_argument("--report", metavar="DIR", help="only render table.md, table.json and curves.png of "
                    "OUT/SUITE/ALGO from its finished cells")

    pl = sub.add_parser("plot", help="write plot.png of a run (return, throughput, policy lag), or compare several "
                        "runs or groups of seeds in one figure (mean and band)")
    pl.add_argument("runs", nargs="*", metavar="RUN", help="a run directory; several, or a folder of runs (what "
                    "--seeds writes), compare them: each folder is a group drawn as its mean and band")
    pl.add_argument("--group", action="append", default=[], metavar="NAME=RUN,RUN",
                    help="a group of runs drawn as one mean and band, named NAME (repeatable)")
    pl.add_argument("--band", choices=("bootstrap", "minmax"), default="bootstrap", help="comparing: the band "
                    "around each group's mean, the 95%% bootstrap interval of the mean (default) or the runs' min-max")
    pl.add_argument("--metric", help="comparing: the metrics.jsonl key to draw (default: eval/return_mean where every "
                    "run evaluates, else episode/return_mean)")
    pl.add_argument("--out", help="where to write it (default RUN/plot.png; comparing a folder of runs: "
                    "FOLDER/plot.png; else compare.png here)")

    lg = sub.add_parser("league", help="a run's league: players by Elo, and payoff.png (win rates)")
    lg.add_argument("run_dir")
    lg.add_argument("--png", help="where to write the payoff heat map (default RUN_DIR/league/payoff.png)")

    sub.add_parser("presets", help="list the experiments that ship with Menger")
    co = sub.add_parser("completion", help="print a shell completion script: eval \"$(menger completion bash)\" in "
                        "~/.bashrc (zsh: in ~/.zshrc, after compinit)")
    co.add_argument("shell", choices=("bash", "zsh"))
    cfg = sub.add_parser("config", help="show every config key with its type, default and meaning")
    cfg.add_argument("experiment", nargs="?", help="print this preset's effective config instead")
    cfg.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")

    for name, (_, _, help_text) in APP_COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def _checkpoint_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--checkpoint", type=_checkpoint_choice, default="latest", metavar="latest|best|STEP",
                        help=f"which checkpoint to {what}: latest (the newest, the default), best (the best "
                        "deterministic evaluation, kept with checkpoint.keep_best=true) or STEP, a checkpoint's step: "
                        "the learner's update count, the number in RUN_DIR/checkpoints/ckpt-STEP (one that is not "
                        "there is refused with the list of those that are)")


def _checkpoint_choice(text: str) -> str | int:
    if text in ("latest", "best"):
        return text
    if text.isdigit():
        return int(text)
    raise argparse.ArgumentTypeError(f"{text!r}: give latest, best, or a checkpoint's step (the learner's update "
                                     "count, the number in RUN_DIR/checkpoints/ckpt-STEP)")


def _count_or_auto(text: str) -> int | str:
    """A whole number, or `auto` (picked by a start-up measurement: menger.runtime.autosize)."""
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number or auto") from None


def _frames(text: str) -> int:
    """A whole, positive number of frames: 200000, 200_000, 2e5, 200k, 1.5M, 1G."""
    scale = {"k": 10**3, "m": 10**6, "g": 10**9}.get(text.strip()[-1:].lower(), 1)
    digits = text.strip()[:-1] if scale != 1 else text.strip()
    try:
        value = float(digits.replace("_", "")) * scale
    except ValueError:
        value = float("nan")
    if not (value >= 1 and value == int(value)):
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number of frames, e.g. 200000, 2e5, 200k or 1M")
    return int(value)


def _train_overrides(args) -> list[str]:
    """The --set overrides, then the flags' keys (a flag wins over a --set of the same key)."""
    flags = {"env.id": args.env, "stop.env_frames": args.frames, "runtime.launcher": args.launcher,
             "runtime.actors": args.actors, "runtime.envs_per_actor": args.envs_per_actor,
             "runtime.seed": args.seed, "runtime.learner.count": args.learners,
             "runtime.ray.address": args.address}
    return list(args.overrides) + [f"{k}={v}" for k, v in flags.items() if v is not None]


def _train_experiment(args):
    """The experiment `menger train` loads: the one named, or --algo's generic preset; checked against --algo."""
    from menger import algorithms
    from menger.config import ConfigError
    from menger.experiment import generic_preset, load_experiment

    if args.experiment is None and args.algorithm is None:
        raise ConfigError("menger train: name an experiment (a preset, see `menger presets`, or a YAML file), or an "
                          "algorithm to train its generic preset: menger train --algo ppo --env Acrobot-v1")
    source = args.experiment if args.experiment is not None else generic_preset(args.algorithm)
    config = load_experiment(source, _train_overrides(args))  # validates everything before starting
    if args.algorithm is not None and algorithms.get(args.algorithm) is not algorithms.get(config.algo):
        raise ConfigError(f"--algo {args.algorithm}: {source} trains with {config.algo}; leave --algo out, or give "
                          f"another experiment (menger train --algo {args.algorithm} alone trains its generic "
                          "preset)")
    return config


def _finish(result, config, stopper=None) -> int:
    """Print the summary and write the plot; the exit code is 128 + the signal's number when one stopped the run."""
    from menger.logging import print_summary
    from menger.commands.plot import plot_run

    from menger.launch.league import player_dirs

    print_summary(result.final_metrics, target_return=config.stop.target_return)
    players = player_dirs(result.run_dir)  # a league: one run directory per learner
    plot_lines = []
    for name, run_dir in (players.items() if players else [("", result.run_dir)]):
        try:
            plot_lines.append(f"plot:    {plot_run(run_dir)}")
        except Exception as exc:  # noqa: BLE001 - a plot failure must not hide the results
            plot_lines.append(f"plot:    not written for {name or run_dir} ({exc})")
    if players:
        print(f"results: {result.run_dir}  (league/, players/{{{','.join(players)}}}/ with metrics.jsonl, tb/, "
              "checkpoints/, config.yaml)")
    else:
        print(f"results: {result.run_dir}  (metrics.jsonl, tb/, checkpoints/, config.yaml)")
    print("\n".join(plot_lines))
    if config.league.mode != "none":
        print(f"league:  menger league {result.run_dir}   (players by Elo, payoff.png)")
    if stopper is not None and stopper.received is not None:
        import signal

        name = signal.Signals(stopper.received).name
        print(f"stopped by {name} with a checkpoint; continue with: menger resume {result.run_dir}")
        return 128 + stopper.received
    if config.stop.target_return is not None:
        print("target reached" if result.reached_target else "target NOT reached")
    return 0


def cmd_train(args, argv: list[str] | None = None) -> int:
    from menger import api
    from menger.runtime import StopOnSignals

    config = _train_experiment(args)
    run_dir = Path(args.run_dir) if args.run_dir else api.default_run_dir(config)
    if args.seeds:
        from menger.cli.seeds import train_seeds

        return train_seeds(_forwarded_train_argv(args), args.seeds, run_dir, parallel=args.parallel,
                           debug=args.debug)
    if args.parallel != 1:
        raise SystemExit("menger train: --parallel N goes with --seeds S1 S2 ...; one run trains alone")
    if args.supervise is not None:
        from menger.cli.supervise import supervise

        child_argv = _child_train_argv((argv or [])[1:], run_dir) + (["--debug"] if args.debug else [])
        return supervise(child_argv, run_dir, restarts=args.supervise, no_progress=args.no_progress)
    print(f"training {config.name} ({config.algo}, {config.coordination}, {config.runtime.launcher} launcher, "
          f"{config.runtime.actors} actors x {config.runtime.envs_per_actor} envs) -> {run_dir}")
    stopper = StopOnSignals()
    try:
        live = not args.no_progress and sys.stdout.isatty()  # a log file or a pipe gets plain lines
        result = api.run_experiment(config, run_dir, progress=live, log_lines=not live, observers=[stopper])
    finally:
        stopper.restore()
    return _finish(result, config, stopper)


SET_PER_SEED = ("seed", "seeds", "parallel", "run_dir", "help")  # what `--seeds` sets for each seed's run itself


def _forwarded_train_argv(args) -> list[str]:
    """The train command line rebuilt from the parsed `args` (every option of `menger train` but SET_PER_SEED),
    for each seed's run of `--seeds`."""
    from menger.cli.completion import subcommands

    out = [args.experiment] if args.experiment is not None else []
    for action in subcommands(_parser())["train"]._actions:
        if not action.option_strings or action.dest in SET_PER_SEED:
            continue
        value, flag = getattr(args, action.dest, None), action.option_strings[-1]
        if isinstance(action, argparse._StoreTrueAction):
            out += [flag] if value else []
        elif isinstance(action, argparse._AppendAction):
            out += [part for item in value or () for part in (flag, str(item))]
        elif value is not None:
            out += [flag, str(value)]
    return out


def _child_train_argv(argv: list[str], run_dir: Path) -> list[str]:
    """This command line without --supervise (and its count), with the run directory fixed."""
    out, skip = [], False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        if arg == "--supervise":
            skip = i + 1 < len(argv) and argv[i + 1].isdigit()
            continue
        if arg.startswith("--supervise="):
            continue
        if arg == "--run-dir":
            skip = True
            continue
        if arg.startswith("--run-dir="):
            continue
        out.append(arg)
    return [*out, "--run-dir", str(run_dir)]


def cmd_resume(args) -> int:
    from menger import api
    from menger.runtime import StopOnSignals

    stopper = StopOnSignals()
    try:
        live = not args.no_progress and sys.stdout.isatty()
        result = api.resume(args.run_dir, args.overrides, progress=live, log_lines=not live, observers=[stopper],
                            allow_import=args.allow_import, checkpoint=args.checkpoint)
    finally:
        stopper.restore()
    return _finish(result, api.load_run_config(args.run_dir, args.allow_import), stopper)


def cmd_eval(args) -> int:
    from menger.commands.evaluate import evaluate_run

    video = args.video or args.video_out is not None or args.video_format is not None
    chosen = args.episodes is not None or args.seed is not None or args.stochastic
    if args.like_training and chosen:
        raise SystemExit("menger eval --like-training plays the run's own evaluation (its eval.episodes, eval.seed, "
                         "deterministic actions); leave out --episodes, --seed and --stochastic")
    # the best checkpoint was chosen by the run's own evaluation: unless other episodes are asked for, play those,
    # so the figure printed is the one recorded for it
    like_training = args.like_training or (args.checkpoint == "best" and not chosen)
    report = evaluate_run(args.run_dir, episodes=args.episodes or 10, deterministic=not args.stochastic, video=video,
                          video_path=args.video_out, video_format=args.video_format,
                          seed=12345 if args.seed is None else args.seed, allow_import=args.allow_import,
                          checkpoint=args.checkpoint, like_training=like_training)
    print(_describe_checkpoint(args.checkpoint, report["checkpoint"]))
    print(f"episodes: {report['episodes']}  mean return: {report['return_mean']:.2f} "
          f"(std {report['return_std']:.2f}, min {report['return_min']:.2f}, max {report['return_max']:.2f})  "
          f"mean length: {report['length_mean']:.1f}")
    if report.get("video"):
        print(f"video: {report['video_record'].describe()}")
    return 0


def _describe_checkpoint(choice, checkpoint: dict) -> str:
    """`checkpoint: best = step 1200 (ckpt-000000001200); recorded during training: eval/return_mean 500.00 ...`"""
    line = f"checkpoint: {choice} = step {checkpoint['step']} ({Path(checkpoint['path']).name})"
    evaluation = checkpoint.get("evaluation")
    if evaluation:
        line += (f"; recorded during training: eval/return_mean {evaluation['return_mean']:.2f} over "
                 f"{evaluation['episodes']} episodes at {evaluation['frames']} frames")
    return line


def cmd_match(args) -> int:
    import json

    import numpy as np

    from menger.commands.match import Timed, env_factory, format_result, make_opponent, match_env, move_times, play_match

    import torch

    # one game at a time: a policy sees one position (or a search's few leaves) per call, where torch's thread
    # pool only adds hand-offs (a Connect Four net's forward: 0.67 ms on one thread, 3.8 ms on two, here)
    torch.set_num_threads(1)
    if args.rollouts and not (args.search or args.opponent_search):
        raise SystemExit(f"menger match: --rollouts {args.rollouts} weighs playouts in a search's leaf values; add "
                         "--search N (or --opponent-search N)")
    if not 0.0 <= args.rollouts <= 1.0:
        raise SystemExit(f"menger match: --rollouts W is the playouts' weight in [0, 1]; got {args.rollouts}")
    env_id, env_kwargs = match_env(args.player, args.env, args.allow_import)
    player_seed, opponent_seed = np.random.SeedSequence(args.seed).generate_state(2)
    player = make_opponent(args.player, env_id, int(player_seed), args.allow_import, policy=args.policy,
                           stochastic=args.stochastic, env_kwargs=env_kwargs, search=args.search,
                           rollouts=args.rollouts)
    opponent = make_opponent(args.opponent, env_id, int(opponent_seed), args.allow_import, stochastic=args.stochastic,
                             env_kwargs=env_kwargs, search=args.opponent_search, rollouts=args.rollouts)
    player, opponent = Timed(player), Timed(opponent)
    result = play_match(env_factory(env_id, env_kwargs), player, opponent, args.games, args.seed)
    timing = move_times(player, opponent)
    if args.json:
        print(json.dumps({"player": args.player, "opponent": args.opponent, "env": env_id, "seed": args.seed,
                          "search": args.search, "opponent_search": args.opponent_search,
                          "rollouts": args.rollouts, **timing,
                          **result.as_dict()}))
    else:
        searched = f" (player searching {args.search} simulations a move" + \
            (f", playouts weighing {args.rollouts})" if args.rollouts else ")") if args.search else ""
        print(format_result(result, f"{args.player} vs {args.opponent} on {env_id}: {args.games} games, seed "
                            f"{args.seed}{searched}"))
        print("; ".join(f"{who.split('_')[0]}: median {seconds * 1000:.1f} ms a move"
                        for who, seconds in timing.items()))
    return 0


def cmd_export(args) -> int:
    from menger.commands.export import export_policy

    path = export_policy(args.run_dir, args.out, args.format, allow_import=args.allow_import,
                         checkpoint=args.checkpoint)
    how = "onnxruntime.InferenceSession(path).run(None, {'obs': obs})" if args.format == "onnx" else \
        "torch.jit.load it and call it on a batch of observations"
    print(f"wrote {path}: {how} (see menger/commands/export.py)")
    return 0


def cmd_plot(args) -> int:
    from menger.commands.compare import is_group, plot_comparison
    from menger.commands.plot import plot_run

    if len(args.runs) == 1 and not args.group and not is_group(Path(args.runs[0])):
        print(plot_run(args.runs[0], args.out))
    else:
        print(plot_comparison(args.runs, args.group, args.out, metric=args.metric, band=args.band))
    return 0


def cmd_bench(args, argv: list[str] | None = None) -> int:
    from menger.commands.bench import bench, write_report

    code = 0
    if args.report:
        paths = write_report(Path(args.report))
    else:
        if not args.suite or not args.algo:
            raise SystemExit("menger bench: give a SUITE and --algo A (or --report OUT/SUITE/ALGO)")
        seeds = args.seed_list or list(range(1, args.seeds + 1))
        command = " ".join(["menger", *(argv or [])])
        summary, paths = bench(args.suite, args.algo, seeds=seeds, out=Path(args.out), envs=args.envs,
                               frames_scale=args.frames_scale, evaluations=args.evaluations,
                               eval_episodes=args.eval_episodes, command=command, retry_failed=args.retry_failed,
                               published=args.published_settings)
        print(f"cells: {len(summary.ran)} ran ({len(summary.failed)} failed), {len(summary.finished_before)} "
              f"finished before, {len(summary.skipped)} skipped")
        code = summary.exit_code  # 128 + the signal's number when one stopped a cell at its checkpoint
    for name, path in paths.items():
        print(f"{name + ':':8s} {path}")
    return code


def cmd_league(args) -> int:
    from menger.league import STATE_FILE, read_state
    from menger.league.report import format_players, write_payoff_png

    state = read_state(Path(args.run_dir) / STATE_FILE)
    print(format_players(state))
    png = write_payoff_png(state, args.png or Path(args.run_dir) / STATE_FILE.parent / "payoff.png")
    print(f"payoff: {png}")
    return 0


def cmd_presets(args) -> int:
    import shutil

    from menger.experiment import list_presets

    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None  # a pipe gets one line each
    print(format_presets(list_presets(), width))
    return 0


def format_presets(presets: dict[str, str], width: int | None = None) -> str:
    """One preset a line, the summaries in a column after the longest name; with a `width`, each summary wrapped
    at word boundaries to fit it (continued under the column)."""
    import textwrap

    column = max((len(name) for name in presets), default=0) + 2
    lines = []
    for name, summary in presets.items():
        if width is None or width - column < 30:
            lines.append(f"{name:{column}s}{summary}".rstrip())
        else:
            wrapped = textwrap.wrap(summary, width - column, break_long_words=False, break_on_hyphens=False) or [""]
            lines.append(f"{name:{column}s}{wrapped[0]}".rstrip())
            lines += [" " * column + line for line in wrapped[1:]]
    return "\n".join(lines)


def cmd_completion(args) -> int:
    from menger.cli.completion import completion_script

    print(completion_script(args.shell, _parser()), end="")
    return 0


def cmd_config(args) -> int:
    from menger.config import describe, to_dict
    from menger.experiment import ExperimentConfig, load_experiment

    if args.experiment:
        import yaml

        print(yaml.safe_dump(to_dict(load_experiment(args.experiment, args.overrides)), sort_keys=False))
    else:
        print(describe(ExperimentConfig))
    return 0


def cmd_tune(args) -> int:
    import time

    from menger.experiment import load_experiment

    config = load_experiment(args.experiment, args.overrides)  # validates the tune: section before anything starts
    out = Path(args.out) if args.out else Path("runs") / f"{config.name}-tune-{time.strftime('%Y%m%d-%H%M%S')}"
    if args.population is not None:
        return _tune_population(args, config, out)
    from menger.tuning.search import format_trials, search

    if args.trials is None or args.trials < 1:
        raise SystemExit("menger tune --search optuna: give --trials N (at least 1)")
    print(f"tuning {config.name}: {args.trials} trials on Optuna -> {out}")
    result = search(args.experiment, out, args.trials, args.overrides, metric=args.metric, direction=args.direction,
                    seed=args.seed)
    print(format_trials(result))
    print(f"study:   {out / 'study.db'}   (run the same command again to go on)")
    if result.best is not None:
        print(f"best:    {out / 'best.json'}   (menger eval {result.best['run_dir']})")
    return 0


def _tune_population(args, config, out: Path) -> int:
    import signal

    from menger.tuning.pbt import train_population

    if args.trials is not None:
        raise SystemExit("menger tune: --trials goes with --search; a population trains --population N members")
    # SIGTERM stops the population as Ctrl-C does: each member writes its checkpoint, and the same command resumes
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    print(f"population-based training of {config.name}: {args.population} members -> {out}")
    try:
        result = train_population(args.experiment, out, args.population, args.overrides, ready=args.ready,
                                  quantile=args.quantile, resample=args.resample, seed=args.seed, metric=args.metric,
                                  executor=args.on, ray_cpus=args.member_cpus, direction=args.direction, echo=print)
    finally:
        signal.signal(signal.SIGTERM, previous)
    if result.reached_at is not None:
        print(f"target reached with {result.reached_at} env frames in all members together")
    print(f"lineage: {out / 'lineage.jsonl'}, {out / 'lineage.png'}   (run the same command again to go on)")
    if result.best is not None:
        print(f"best:    member {result.best['member']} ({result.best['values']}), score {result.best['score']:.4g}"
              f" -> {result.best['run_dir']}   (menger eval / menger resume take it)")
    return 0


COMMANDS = {"train": cmd_train, "resume": cmd_resume, "tune": cmd_tune, "eval": cmd_eval, "match": cmd_match, "export": cmd_export,
            "plot": cmd_plot, "league": cmd_league, "presets": cmd_presets,
            "config": cmd_config, "completion": cmd_completion}


def _split_debug(argv: list[str]) -> tuple[list[str], bool]:
    """The command line without `--debug` (a global flag, taken anywhere), and whether a traceback is wanted."""
    rest = [arg for arg in argv if arg != "--debug"]
    wanted = os.environ.get("MENGER_DEBUG", "").strip().lower() not in ("", "0", "false", "no", "off")
    return rest, wanted or len(rest) != len(argv)


def _exit_code(exc: BaseException) -> int:
    """2: the config is wrong; 3: every actor is gone; 1: anything else (130 and 128 + N: interrupts, signals)."""
    from menger.config import ConfigError
    from menger.runtime import NoActorsError

    if isinstance(exc, ConfigError):
        return 2
    return 3 if isinstance(exc, NoActorsError) else 1


def _report(exc: Exception, command: str, debug: bool) -> int:
    """Print one clear message for a failed command (and the traceback with --debug); return the exit code."""
    import dataclasses
    import traceback

    from menger.config import ConfigError
    from menger.explain import explain

    explanation = explain(exc, command)
    if isinstance(exc, ConfigError):
        explanation = dataclasses.replace(explanation, what=f"config error: {explanation.what}")
    if debug:
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
        for role, (text, child_tb) in (getattr(exc, "child_errors", {}) or {}).items():
            print(f"\n{role}: {text}\n{child_tb or '(no traceback reported)'}".rstrip(), file=sys.stderr)
    print(explanation.message(getattr(exc, "error_file", None), debug=debug), file=sys.stderr)
    return _exit_code(exc)


def main(argv: list[str] | None = None) -> int:
    argv, debug = _split_debug(list(sys.argv[1:] if argv is None else argv))
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    command = argv[0] if argv else "menger"
    try:
        if argv and argv[0] in APP_COMMANDS:
            import importlib

            module, function, _ = APP_COMMANDS[argv[0]]
            return int(getattr(importlib.import_module(module), function)(argv[1:]) or 0)
        args = _parser().parse_args(argv)
        args.debug = debug
        if args.command in LINUX_ONLY:
            from menger.extras import require_linux

            require_linux(f"menger {args.command}")
        if args.command == "train":
            return cmd_train(args, argv)
        if args.command == "bench":
            return cmd_bench(args, argv)
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:
        print("menger: interrupted; the run directory holds a checkpoint to resume from", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and the like
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:  # noqa: BLE001 - every failure ends in one message that says what to do
        return _report(exc, command, debug)


if __name__ == "__main__":
    sys.exit(main())
