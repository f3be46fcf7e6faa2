"""Resuming a run: the trainer's state back from its newest checkpoint (or its best, or a step), and what changed
in its config.

    saved = saved_config(run_dir)            # before the resumed run rewrites config.yaml
    check_same_inputs(saved, cfg)            # a policy cannot change its inputs on resume
    restore(trainer, saved)                  # learner, version, accounts, clocks, replay, league, evaluator...
    restore(trainer, saved, "best")          # ... from the best checkpoint, or from a step (an int)

Going on from a checkpoint older than the newest rewinds the run to it: the newer checkpoints (and BEST.json, if
it names one of them) move to checkpoints/rewound-<time>/, untouched, and the run saves its own steps after it.

A stop rule that was already met when the run stopped ends the resume at once, unless the resume moved it."""
from __future__ import annotations

import logging
from pathlib import Path

import torch

from menger.checkpoint import unflatten_state
from menger.config import ConfigError, from_dict, load_yaml, to_dict
from menger.experiment import ExperimentConfig, migrate_legacy_keys
from menger.runtime.accounting import FrameAccounts

log = logging.getLogger("menger.trainer")


def saved_config(run_dir: Path) -> dict | None:
    """The run directory's config before a resume rewrites it, normalised (None when it cannot be read)."""
    try:
        return to_dict(from_dict(ExperimentConfig, migrate_legacy_keys(load_yaml(run_dir / "config.yaml"))))
    except (OSError, ConfigError):
        return None


def check_same_inputs(saved: dict, cfg) -> None:
    """A resume cannot switch observation normalisation: the saved policy was trained on the other inputs."""
    trained = bool(saved.get("env", {}).get("normalize", {}).get("obs", False))
    if trained != cfg.env.normalize.obs:
        raise ConfigError(f"env.normalize.obs={cfg.env.normalize.obs} but the run was trained "
                          f"{'with' if trained else 'without'} it: a policy cannot change its inputs on resume; "
                          f"resume with env.normalize.obs={trained}, or train a new run")


def config_changes(old: dict, new: dict, prefix: str = "") -> dict[str, tuple]:
    """{dotted key: (old, new)} for every leaf that differs between two config dicts."""
    out = {}
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict) and key not in ("kwargs",):
            out.update(config_changes(a, b, f"{prefix}{key}."))
        elif a != b:
            out[f"{prefix}{key}"] = (a, b)
    return out


def restore(t, saved: dict | None = None, which: str | int = "latest") -> None:
    """Load a checkpoint of trainer `t`'s run into it: the newest, "best" or a step; `saved`: the run's config
    before this resume."""
    if which == "latest":
        checkpoint = t.checkpoints.load_latest()
        if checkpoint is None:
            raise RuntimeError(f"nothing to resume in {t.run_dir}: it has no checkpoint")
    else:
        checkpoint = t.checkpoints.load(which)
        rewound = t.checkpoints.set_aside_after(checkpoint.step)
        if rewound is not None:
            log.warning("resuming from %s rewinds the run: the checkpoints after it are kept in %s, where nothing "
                        "loads or prunes them", checkpoint.path.name, rewound)
    state = unflatten_state(checkpoint.tensors, checkpoint.metadata)
    t.learner.load_state_dict(state["learner"])
    t.version = int(state["version"])
    t.accounts = FrameAccounts.from_state(state["accounts"])
    t.wall_offset = float(state["wall_s"])
    torch.set_rng_state(state["torch_rng"])
    t._restores = {int(k): v for k, v in state.get("actors", {}).items()}
    if "replay" in state:
        t.coordinator.load_state(state["replay"])
    if t.normalization is not None and "normalization" in state:
        t.normalization.load_state(state["normalization"])
    if t.league is not None and "league" in state and t._league_given is None:
        t.league.hub.load_state(state["league"])  # a league of several learners is restored by its runner
    if t.evaluator is not None and "evaluator" in state:
        t.evaluator.load_state(state["evaluator"])
        t.eval_stats = t.evaluator.last
    if t.video is not None:  # the first video of a resumed run comes an interval after where it resumed
        t.video.next_at = t.wall_offset + t.video.interval_s
    t._saved_step = t.learner.updates
    log.info("resumed from %s (update %d, %d frames, parameter version %d)", checkpoint.path.name,
             t.learner.updates, t.accounts.accepted, t.version)
    t.config_changes = config_changes(saved, to_dict(t.cfg)) if saved is not None else {}
    for key, (old, new) in t.config_changes.items():
        log.info("config changed for this resume: %s: %r -> %r", key, old, new)
    _say_what_is_met(t)


def _say_what_is_met(t) -> None:
    eval_return = t.eval_stats.get("eval/return_mean") if t.eval_stats else None
    met = t.stop_rules.met(t.accounts, t.wall_offset, eval_return)
    set_aside = t.stop_rules.resumed(t.accounts, t.wall_offset, eval_return, set(t.config_changes))
    if set_aside:
        log.info("already met when the run stopped, set aside for this resume (a stop rule was moved, so "
                 "training goes on): %s", ", ".join(set_aside))
    elif met:
        log.warning("already met when the run stopped: %s, so this resume stops at once; move a stop rule "
                    "to go on (e.g. --set stop.env_frames=N, stop.target_return=R, stop.wall_clock_s=S)",
                    ", ".join(met))
