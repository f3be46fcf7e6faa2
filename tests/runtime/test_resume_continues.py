"""A resume does what the user asked: moving a stop rule past where the run stopped continues training (a rule
already met that the resume left alone is set aside), a resume that moves nothing stops at once, and a linear
LR schedule continues from the LR it had, annealing to 0 at the new end, instead of jumping."""
import copy

import gymnasium as gym
import pytest
import torch

from menger import api
from menger.algorithms.ppo.spec import PPOConfig
from menger.experiment import StopConfig
from menger.learners import PPOLearner
from menger.models import Policy
from menger.runtime.stopping import StopRules

SMALL = ["runtime.launcher=threads", "runtime.actors=1", "runtime.envs_per_actor=8", "runtime.unroll_length=32",
         "runtime.learner.threads=1", "runtime.learner.device=cpu", "checkpoint.interval_s=0", "log.tensorboard=false"]


class Accounts:
    def __init__(self, accepted, mean):
        self.accepted, self._mean = accepted, mean

    def mean_return(self, window):
        return self._mean


def test_a_moved_stop_rule_sets_aside_the_rules_already_met_that_were_left_alone():
    rules = StopRules(StopConfig(target_return=475, env_frames=100_000, wall_clock_s=600))
    accounts = Accounts(accepted=50_000, mean=480.0)
    assert rules.met(accounts, 30.0) == ["target_return"]
    assert rules.resumed(accounts, 30.0, None, changed={"ppo.lr"}) == []  # no stop rule moved: stop at once
    assert rules.after_update(accounts, 30.0, False) == "target_return"
    assert rules.resumed(accounts, 30.0, None, changed={"stop.env_frames"}) == ["target_return"]
    assert rules.after_update(accounts, 30.0, False) is None  # goes on ...
    assert rules.after_update(Accounts(100_000, 480.0), 40.0, False) == "env_frames"  # ... to the moved rule
    moved_target = StopRules(StopConfig(target_return=490, env_frames=100_000))
    assert moved_target.resumed(accounts, 0.0, None, changed={"stop.target_return"}) == []  # 480 < 490 anyway


def _learner(total_frames, lr=1e-3):
    torch.manual_seed(0)
    policy = Policy(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2), hidden=(8,))
    return PPOLearner(policy, PPOConfig(lr=lr, lr_schedule="linear"), device=torch.device("cpu"),
                      total_frames=total_frames, amp=False, seed=0)


def test_a_resumed_linear_schedule_continues_from_its_lr_to_zero_at_the_new_end():
    first = _learner(1000)
    assert first._set_lr(500) == pytest.approx(5e-4)
    state = copy.deepcopy(first.state_dict())
    same = _learner(1000)
    same.load_state_dict(state)
    assert same._set_lr(750) == first._set_lr(750)  # the same end: the same schedule, bit for bit
    longer = _learner(2000)
    longer.load_state_dict(state)
    assert longer._set_lr(500) == pytest.approx(5e-4)  # no jump where the run was
    assert longer._set_lr(1250) == pytest.approx(2.5e-4) and longer._set_lr(2000) == 0.0
    relearn = _learner(2000, lr=3e-3)  # a new lr scales the schedule where it was (x3), then to 0 at the new end
    relearn.load_state_dict(state)
    assert relearn._set_lr(500) == pytest.approx(1.5e-3) and relearn._set_lr(1250) == pytest.approx(7.5e-4)
    constant = PPOLearner(Policy(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2), hidden=(8,)),
                          PPOConfig(lr=3e-3, lr_schedule="constant"), device=torch.device("cpu"), total_frames=2000,
                          amp=False, seed=0)
    constant.load_state_dict(state)
    assert constant._set_lr(1250) == 3e-3  # a constant LR is simply the new value


def test_resume_past_a_reached_target_trains_on_to_the_new_stop(tmp_path, quiet):
    run_dir = tmp_path / "run"
    first = api.train("cartpole-ppo", overrides=[*quiet, *SMALL, "stop.target_return=15", "stop.env_frames=1000000"],
                      run_dir=str(run_dir))
    assert first.reached_target
    frames = first.final_metrics["time/env_frames"]
    resumed = api.resume(run_dir, overrides=[f"stop.env_frames={frames + 4096}"]).final_metrics
    assert resumed["time/env_frames"] >= frames + 4096  # it trained on instead of stopping at the old target
    again = api.resume(run_dir).final_metrics  # nothing moved: the rules already met stop it at once
    assert again["time/env_frames"] <= resumed["time/env_frames"] + 256 * 2


def test_a_resume_with_its_wall_clock_already_spent_stops_without_failing(tmp_path, quiet):
    """Not "passed without a single update": the time ran out in the run before, which did update."""
    run_dir = tmp_path / "run"
    first = api.train("cartpole-ppo", overrides=[*quiet, *SMALL, "stop.target_return=null", "stop.env_frames=null",
                                                 "stop.wall_clock_s=1.0"], run_dir=str(run_dir))
    assert first.final_metrics["learner/updates"] > 0
    again = api.resume(run_dir).final_metrics  # the wall clock is spent: it stops at once, as the log says
    assert again["learner/updates"] == first.final_metrics["learner/updates"]
