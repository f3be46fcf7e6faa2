"""`menger tune EXP --search optuna --trials N`: hyperparameter search on Optuna over the experiment's `tune:` keys.

    study = optuna study in OUT/study.db (SQLite)     # made, or loaded: a killed search goes on where it was
    for each trial still to run:
        values = the sampler's (TPE, seeded) draw of every `tune:` key
        api.train(EXP, overrides + values, run_dir=OUT/trials/trial-NNNN)
            on each metrics record: report the learning curve to the trial at fixed fractions of
            stop.env_frames, so every trial is compared at the same frames; the pruner (median) may stop it
        its value: the area under that learning curve (the mean of its points; after a run stopped at its
        target, the rest of the budget counts at the last value), so learning sooner scores higher
    OUT/best.json: the best trial's values, its value and its run directory (`menger eval`, `menger resume` take it)

Every trial trains for the same `stop.env_frames` (the budget a search compares on). A trial that was running
when the search was killed is marked failed when it resumes, and its values are tried again first. Optuna does
the sampling and the pruning: Menger only turns trials into runs and learning curves into reports.
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from menger import registry
from menger.config import ConfigError
from menger.experiment import Tuned, load_experiment, load_experiment_data, tune_spec
from menger.extras import require
from menger.runtime import Observer
from menger.runtime.stopping import TrainingFailed

log = logging.getLogger("menger.tune")

REPORTS = 20  # points of the learning curve a trial reports: at every 5 % of stop.env_frames


def default_metric(algo: str) -> str:
    """What a trial is scored on: the greedy evaluation's return for an algorithm whose actors explore (its
    registry entry's `evaluation`), else the training return."""
    return "eval/return_mean" if registry.get(algo).evaluation == "greedy" else "episode/return_mean"


def suggest(trial, tuned: Tuned):
    """The trial's value of one tuned key, drawn by Optuna's sampler."""
    if tuned.kind == "log_uniform":
        return trial.suggest_float(tuned.key, tuned.low, tuned.high, log=True)
    if tuned.kind == "uniform":
        return trial.suggest_float(tuned.key, tuned.low, tuned.high)
    if tuned.kind == "int_uniform":
        return trial.suggest_int(tuned.key, int(tuned.low), int(tuned.high))
    return trial.suggest_categorical(tuned.key, list(tuned.choices))


class LearningCurve(Observer):
    """Reports a run's `metric` to its trial at fixed fractions of its frame budget, and stops the run (with its
    closing checkpoint) when the pruner says so."""

    def __init__(self, trial, metric: str, total_frames: int, reports: int = REPORTS):
        self.trial, self.metric, self.reports = trial, metric, reports
        self.every = max(1, total_frames // reports)
        self.reported = 0   # the last step reported (frames // every)
        self.last: float | None = None
        self.points: list[float] = []
        self.pruned = False

    def area(self) -> float | None:
        """The mean of the curve's points over the whole budget; the steps after an early stop count at the last
        value (a run stops early at its target)."""
        if self.last is None:
            return None
        points = self.points[:self.reports]
        return (sum(points) + (self.reports - len(points)) * self.last) / self.reports

    def on_metrics(self, trainer, metrics: dict) -> None:
        value = metrics.get(self.metric)
        if value is None or self.pruned:
            return
        self.last = float(value)
        step = int(metrics.get("time/env_frames", 0)) // self.every
        if step > self.reported:
            self.points += [self.last] * (step - self.reported)  # a record may cross several steps
            self.reported = step
            self.trial.report(self.last, step)
            if self.trial.should_prune():
                self.pruned = True
                trainer.request_stop()


@dataclass
class SearchResult:
    out_dir: Path
    best: dict | None
    trials: list[dict]


def search(experiment: str, out_dir: str | Path, trials: int, overrides: list[str] = (), *, metric: str | None = None,
           direction: str = "maximize", seed: int = 0) -> SearchResult:
    """Run (or go on with) the search in `out_dir` until `trials` trials have finished (completed or pruned)."""
    optuna = _optuna()

    config = load_experiment(experiment, list(overrides))
    spec = tune_spec(config)
    if not spec:
        raise ConfigError(f"{experiment}: nothing to tune; add a `tune:` section, e.g. tune: {{ppo.lr: {{log_uniform: "
                          "[1.0e-4, 1.0e-2]}}}}, or --set 'tune.ppo.lr={log_uniform: [1.0e-4, 1.0e-2]}'")
    if config.stop.env_frames is None:
        raise ConfigError("menger tune compares trials on one frame budget: set stop.env_frames")
    metric = metric or default_metric(config.algo)
    out_dir = Path(out_dir)
    (out_dir / "trials").mkdir(parents=True, exist_ok=True)
    data = load_experiment_data(experiment, list(overrides))
    (out_dir / "experiment.json").write_text(json.dumps(data, indent=2, default=str))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = _open_study(optuna, config.name, out_dir / "study.db", direction, seed)
    _retry_interrupted(study)
    finished = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    remaining = trials - sum(t.state in finished for t in study.get_trials(deepcopy=False))
    if remaining > 0:
        study.optimize(lambda trial: _objective(trial, experiment, overrides, spec, metric, config, out_dir),
                       n_trials=remaining, callbacks=[lambda s, t: _write_best(s, out_dir)],
                       catch=(TrainingFailed,))  # values that cannot learn are a result (failed), not a crash
    _write_best(study, out_dir)
    return SearchResult(out_dir, _best(study, out_dir), [_row(t, out_dir) for t in study.get_trials()])


def _optuna():
    return require("optuna", "tune", "`menger tune --search optuna`")


def _open_study(optuna, name: str, path: Path, direction: str, seed: int, tries: int = 5):
    """The study in `path`, made or loaded. Another process opening the same new file at that moment (a dashboard,
    a second `menger tune`) can win the race to write its schema; the loser's error is retried, not fatal."""
    from sqlalchemy.exc import IntegrityError, OperationalError

    for attempt in range(tries):
        try:
            return optuna.create_study(
                study_name=name, storage=f"sqlite:///{path}", load_if_exists=True, direction=direction,
                sampler=optuna.samplers.TPESampler(seed=seed),
                pruner=optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=REPORTS // 4))
        except (IntegrityError, OperationalError):
            if attempt == tries - 1:
                raise
            time.sleep(0.2 * (attempt + 1))


def _objective(trial, experiment, overrides, spec, metric, config, out_dir: Path) -> float:
    optuna = _optuna()

    from menger import api

    values = {tuned.key: suggest(trial, tuned) for tuned in spec}
    run_dir = _run_dir(out_dir, trial.number)
    trial.set_user_attr("run_dir", str(run_dir))
    curve = LearningCurve(trial, metric, config.stop.env_frames)
    settings = [*overrides, *(f"{key}={json.dumps(value)}" for key, value in values.items())]
    log.info("trial %d: %s -> %s", trial.number, values, run_dir)
    result = api.train(experiment, overrides=settings, run_dir=run_dir, observers=[curve])
    if result.final_metrics.get(metric) is not None:
        curve.last = float(result.final_metrics[metric])  # the closing record, after the last report
    value = curve.area()
    if curve.pruned:
        raise optuna.TrialPruned(f"pruned at {curve.reported * curve.every} frames ({metric} {curve.last})")
    if value is None:
        raise RuntimeError(f"trial {trial.number} ({run_dir}) recorded no {metric}; train longer "
                           "(stop.env_frames) or pick another --metric")
    return float(value)


def _run_dir(out_dir: Path, number: int) -> Path:
    return out_dir / "trials" / f"trial-{number:04d}"


def _retry_interrupted(study) -> None:
    """Trials left running by a search that was killed: failed now, and their values tried again first."""
    optuna = _optuna()

    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        study._storage.set_trial_state_values(trial._trial_id, optuna.trial.TrialState.FAIL)
        study.enqueue_trial(trial.params, user_attrs={"retry_of": trial.number}, skip_if_exists=False)
        log.warning("trial %d was running when the search stopped: marked failed, its values queued again",
                    trial.number)


def _best(study, out_dir: Path) -> dict | None:
    try:
        best = study.best_trial
    except ValueError:  # no trial completed yet
        return None
    return {"trial": best.number, "value": best.value, "params": best.params,
            "run_dir": best.user_attrs.get("run_dir", str(_run_dir(out_dir, best.number)))}


def _write_best(study, out_dir: Path) -> None:
    best = _best(study, out_dir)
    if best is not None:
        (out_dir / "best.json").write_text(json.dumps(best, indent=2))


def _row(trial, out_dir: Path) -> dict:
    return {"trial": trial.number, "state": trial.state.name.lower(), "value": trial.value, "params": trial.params,
            "run_dir": trial.user_attrs.get("run_dir", str(_run_dir(out_dir, trial.number)))}


def format_trials(result: SearchResult) -> str:
    """A line per trial: its state, its score (area under its learning curve; none for a pruned one), its values."""
    keys = sorted({key for row in result.trials for key in row["params"]})
    lines = ["  ".join(["trial", "state   ", "score     ", *keys])]
    for row in result.trials:
        value = "-" if row["value"] is None or row["state"] != "complete" else f"{row['value']:.4g}"
        params = [f"{row['params'].get(key, '-'):.4g}" if isinstance(row["params"].get(key), float)
                  else str(row["params"].get(key, "-")) for key in keys]
        lines.append("  ".join([f"{row['trial']:>5}", f"{row['state']:<8}", f"{value:<10}", *params]))
    if result.best is not None:
        lines.append(f"best: trial {result.best['trial']}, value {result.best['value']:.4g}, "
                     f"{result.best['params']} -> {result.best['run_dir']}")
    return "\n".join(lines)
