"""Central inference: the same actions as local inference, a dynamic batch bounded by its cap and timeout."""
import threading
import time

import gymnasium as gym
import pytest
import torch

from menger import api
from menger.experiment import ModelConfig, load_experiment
from menger.inference import CentralActions, CentralInference, InferenceSlots, LocalInference
from menger.models import build_policy
from menger.params import SharedParameters

B = 8


def _service(obs_space, action_space, *, actors=1, lstm_size=0, max_requests=1, timeout_s=0.0, seed=5):
    torch.manual_seed(0)
    policy = build_policy(obs_space, action_space, ModelConfig(hidden=(16, 16), lstm_size=lstm_size))
    params = SharedParameters(policy, shared=True)
    params.publish(policy, 3)
    slots = InferenceSlots.allocate(actors, B, obs_space, action_space, lstm_size)
    service = CentralInference(slots, policy, params, torch.device("cpu"), max_requests=max_requests,
                               timeout_s=timeout_s, seed=seed)
    return policy, params, slots, service


@pytest.mark.parametrize("obs_space, action_space, lstm_size", [
    (gym.spaces.Box(-1.0, 1.0, (4,)), gym.spaces.Discrete(3), 0),
    (gym.spaces.Box(-1.0, 1.0, (4,)), gym.spaces.Discrete(3), 8),
    (gym.spaces.Box(-1.0, 1.0, (3,)), gym.spaces.Box(-2.0, 2.0, (2,)), 0),
], ids=["discrete", "lstm", "box"])
def test_central_actions_match_local_inference(obs_space, action_space, lstm_size):
    policy, params, slots, service = _service(obs_space, action_space, lstm_size=lstm_size)
    service.start()
    try:
        client = CentralActions(slots, 0, params, timeout_s=10.0)
        generator = torch.Generator().manual_seed(5)
        state = policy.initial_state(B) if lstm_size else None
        for step in range(3):
            if step == 2:  # a new version: the service must pick it up before its next forward
                with torch.no_grad():
                    for p in policy.parameters():
                        p.add_(0.1)
                params.publish(policy, 4)
            obs = torch.randn(B, *obs_space.shape)
            local = policy.act(obs, state, generator=generator)
            central = client.act(obs, state)
            assert torch.equal(central.action, local.action)
            torch.testing.assert_close(central.logp, local.logp)
            if lstm_size:
                torch.testing.assert_close(central.state, local.state)
                state = local.state
        assert client.refresh() == 4 and service.version == 4
    finally:
        service.close()


def _request_in_background(slots, params, actors):
    threads = [threading.Thread(target=CentralActions(slots, a, params, timeout_s=10.0).act,
                                args=(torch.zeros(B, 4), None), daemon=True) for a in actors]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 30.0
    while int((slots.request_seq != slots.reply_seq).sum()) < len(actors):
        assert time.monotonic() < deadline, f"only {int((slots.request_seq != slots.reply_seq).sum())} of " \
                                            f"{len(actors)} requests arrived within 30 s"
        time.sleep(0.001)
    return threads


def test_dynamic_batch_respects_its_cap():
    _, params, slots, service = _service(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2), actors=5,
                                         max_requests=2, timeout_s=1.0)
    threads = _request_in_background(slots, params, range(5))
    began = time.monotonic()
    served = [service.serve_once(wait_s=1.0) for _ in range(2)]
    assert time.monotonic() - began < 0.9  # full batches go at once
    served.append(service.serve_once(wait_s=1.0))  # the last one waits out the timeout
    assert served == [2, 2, 1]
    for thread in threads:
        thread.join(2.0)
    assert all(not t.is_alive() for t in threads) and slots.reply_seq.tolist() == [1] * 5
    assert service.metrics()["inference/batch_size_mean"] == pytest.approx(5 / 3)


def test_a_full_batch_does_not_wait_for_the_timeout():
    _, params, slots, service = _service(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2), actors=3,
                                         max_requests=3, timeout_s=10.0)
    threads = _request_in_background(slots, params, range(3))
    began = time.monotonic()
    assert service.serve_once(wait_s=1.0) == 3
    assert time.monotonic() - began < 1.0
    for thread in threads:
        thread.join(2.0)


def test_a_partial_batch_goes_after_the_timeout():
    _, params, slots, service = _service(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2), actors=4,
                                         max_requests=4, timeout_s=0.2)
    threads = _request_in_background(slots, params, [1])
    began = time.monotonic()
    assert service.serve_once(wait_s=1.0) == 1
    waited = time.monotonic() - began
    assert 0.2 <= waited < 1.0, waited
    threads[0].join(2.0)
    metrics = service.metrics()
    assert metrics["inference/batch_size_mean"] == 1.0 and metrics["inference/latency_ms_mean"] >= 200.0


@pytest.mark.parametrize("mode, service", [("local", LocalInference), ("central", CentralInference)])
def test_a_local_launcher_starts_the_inference_service_the_config_names(mode, service):
    from menger.launch import ThreadLauncher
    from menger.transport import UnrollSpec

    config = load_experiment("cartpole-impala", [f"runtime.inference.mode={mode}", "runtime.actors=2"])
    obs_space, action_space = gym.spaces.Box(-1.0, 1.0, (4,)), gym.spaces.Discrete(2)
    policy = build_policy(obs_space, action_space, config.model)
    launcher = ThreadLauncher(config.runtime)
    transport = launcher.make_transport(UnrollSpec(obs_space, action_space, 8, 4), policy, slots_per_actor=2)
    started = launcher.start_inference(policy, transport, torch.device("cpu"))
    try:
        assert isinstance(started, service)
        if mode == "central":
            assert started.slots.num_actors == 2 and "inference" in started.actor_kwargs()
    finally:
        started.close()
        transport.shutdown([])


@pytest.mark.parametrize("launcher", ["threads", "processes"])
def test_trainer_with_central_inference_runs_and_reports(tmp_path, quiet, launcher):
    result = api.train("cartpole-impala", quiet + ["runtime.inference.mode=central", f"runtime.launcher={launcher}",
                                                   "runtime.actors=2", "runtime.envs_per_actor=8",
                                                   "stop.env_frames=4000", "stop.target_return=null"],
                       run_dir=str(tmp_path / "run"))
    m = result.final_metrics
    assert m["time/env_frames"] >= 4000 and m["transport/duplicates"] == 0
    # the means are per interval, and the run's last interval may have served none: the run's totals
    assert m["inference/forwards"] > 0 and 1.0 <= m["inference/requests"] / m["inference/forwards"] <= 2.0


@pytest.mark.slow
def test_cartpole_impala_with_central_inference_reaches_475(tmp_path, quiet):
    result = api.train("cartpole-impala", quiet + ["runtime.inference.mode=central", "runtime.launcher=processes",
                                                   "runtime.seed=0"], run_dir=str(tmp_path / "run"))
    assert result.reached_target, result.final_metrics
