"""Success is not reported for runs that learned nothing (docs/guides/reliability.md, promise 6): an env whose values are
always NaN, a loss that stopped being finite, and a wall clock that ran out without one update each end the
run with `TrainingFailed` (exit code 1), saying why."""
import gymnasium
import numpy as np
import pytest

from menger.checkpoint import CheckpointManager, unflatten_state
from menger.runtime import TrainingFailed


class AlwaysNaNEnv(gymnasium.Env):
    """Every observation holds a NaN: every transition is dropped, nothing can be learned."""

    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (4,), dtype=np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(4, np.float32), {}

    def step(self, action):
        return np.full(4, np.nan, np.float32), 1.0, False, False, {}


def test_a_run_whose_frames_are_all_lost_to_env_faults_fails_naming_the_share(harness):
    if "menger-tests/AlwaysNaN-v0" not in gymnasium.registry:
        gymnasium.register("menger-tests/AlwaysNaN-v0", entry_point=AlwaysNaNEnv)
    config = harness.config("runtime.launcher=threads", "runtime.actors=1", "env.id=menger-tests/AlwaysNaN-v0",
                            "stop.target_return=null", "stop.env_frames=100000")
    run = harness.start(config)
    with pytest.raises(TrainingFailed, match=r"of the \d+ frames produced were lost to env faults.*"
                                             r"nonfinite_dropped.*stop.max_invalid_fraction=0.5") as failed:
        run.join(120)
    print(f"{failed.value}")
    assert run.trainer.accounts.unrolls < 40, "it took far longer than the 20 unrolls the rule waits for"


def test_a_loss_that_stops_being_finite_fails_the_run_and_saves_nothing_after_it(harness):
    # A learning rate of 1e30 with no gradient clip: Adam's first steps move every weight by about 1e30, and the
    # loss overflows (an infinite lr is refused by the config itself)
    config = harness.config("runtime.launcher=threads", "runtime.actors=1", "ppo.lr=1e30", "ppo.max_grad_norm=0",
                            "stop.target_return=null", "stop.env_frames=100000", "checkpoint.interval_updates=1",
                            "checkpoint.interval_s=0")
    run = harness.start(config, run_dir=harness.tmp_path / "run")
    with pytest.raises(TrainingFailed, match=r"the loss was (nan|inf) for 3 updates in a row "
                                             r"\(stop.max_nonfinite_updates\)"):
        run.join(120)
    checkpoint = CheckpointManager(harness.tmp_path / "run" / "checkpoints").load_latest()
    if checkpoint is not None:  # checkpoints of the first updates may exist; no closing one with lost parameters
        state = unflatten_state(checkpoint.tensors, checkpoint.metadata)
        assert state["learner"]["updates"] < run.trainer.learner.updates


def test_a_wall_clock_that_runs_out_without_a_single_update_is_a_failure(harness):
    config = harness.config("runtime.launcher=processes", "env.id=menger/Faulty-v0",
                            "env.kwargs={reset_failures: -1}", "runtime.actors=1",
                            "runtime.supervision.max_restarts=100", "runtime.supervision.no_actor_deadline_s=600",
                            "stop.target_return=null", "stop.env_frames=null", "stop.wall_clock_s=2")
    run = harness.start(config)
    with pytest.raises(TrainingFailed, match=r"stop.wall_clock_s=2.0 passed without a single update "
                                             r"\(\d+ frames produced\); last actor errors"):
        run.join(120)
