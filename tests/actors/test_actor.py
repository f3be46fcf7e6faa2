"""`Actor` against a fake port: what it writes into a slot, the tag it sends, when it copies parameters, its
heartbeats, and its loop over grants. No transport, no learner: the port is a dict of local slots."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from menger.actors import Actor
from menger.envs import make_vec_env
from menger.models import build_policy
from menger.models.build import policy_network
from menger.experiment import ModelConfig
from menger.transport import UnrollBuffers, UnrollSpec

T, B = 8, 3


class FakeParams:
    """A parameter source whose version the test moves; counts the copies the actor makes."""

    def __init__(self, policy):
        self.source, self.current, self.reads = policy, 0, 0

    def version(self) -> int:
        return self.current

    def read_into(self, module, timeout_s: float = 10.0) -> int:
        module.load_state_dict(self.source.state_dict())
        self.reads += 1
        return self.current


class FakePort:
    """Local slots, the fake parameters, the heartbeats the actor sends, and a script of grants for its loop."""

    def __init__(self, spec: UnrollSpec, policy, grants=()):
        self.buffers = UnrollBuffers(spec, 2, shared=False)
        self.params = FakeParams(policy)
        self.beats: list[tuple[int, int]] = []
        self.grants, self.submitted = list(grants), []

    def slot(self, index: int) -> dict:
        return self.buffers.slot(index)

    def num_slots(self) -> int:
        return self.buffers.num_slots

    def beat(self, actor_id: int, frames_in_unroll: int) -> None:
        self.beats.append((actor_id, frames_in_unroll))

    def wait_for_grant(self, actor_id: int, snapshot, timeout_s: float):
        return self.grants.pop(0) if self.grants else None

    def submit(self, slot: int, meta) -> None:
        self.submitted.append((slot, meta))


@pytest.fixture
def actor_and_port():
    envs = make_vec_env("CartPole-v1", B, seed=5)
    torch.manual_seed(0)
    learner_policy = policy_network(envs.single_observation_space, envs.single_action_space, ModelConfig())
    policy = build_policy(envs.single_observation_space, envs.single_action_space, ModelConfig(), "ppo")
    spec = UnrollSpec(envs.single_observation_space, policy.action_space, T, B)
    port = FakePort(spec, learner_policy, grants=[0, 1, 0])
    actor = Actor(7, 2, envs, policy, port, unroll_length=T, seed=11)
    yield actor, port, learner_policy
    envs.close()


def test_an_unroll_fills_its_slot_and_tags_it(actor_and_port):
    actor, port, _ = actor_and_port
    first_obs = np.array(actor.obs)
    meta = actor.unroll(1)
    view = port.slot(1)
    assert torch.equal(view["obs"][0], torch.as_tensor(first_obs, dtype=view["obs"].dtype))
    assert view["actions"].shape == (T, B) and set(view["actions"].unique().tolist()) <= {0, 1}
    assert torch.all(view["rewards"] == 1.0) and torch.all(view["valid"] == 1.0)  # CartPole: 1 per live step
    assert torch.all(view["logp"] <= 0.0)  # log-probabilities of the actions taken
    assert np.array_equal(view["obs"][T].numpy(), actor.obs)  # the bootstrap observation is where it stands now
    assert (meta.actor_id, meta.incarnation, meta.sequence, meta.frames) == (7, 2, 1, T * B)
    assert meta.policy_version == 0 and meta.invalid_frames == 0


def test_it_beats_every_step_and_once_at_the_end(actor_and_port):
    actor, port, _ = actor_and_port
    actor.unroll(0)
    assert port.beats == [(7, (t + 1) * B) for t in range(T)] + [(7, 0)]


def test_it_copies_parameters_only_when_their_version_moved(actor_and_port):
    actor, port, learner_policy = actor_and_port
    actor.unroll(0)
    actor.unroll(1)
    assert port.params.reads == 1  # the first unroll copied version 0; the second found nothing new
    port.params.current = 4
    meta = actor.unroll(0)
    assert port.params.reads == 2 and meta.policy_version == 4
    for mine, theirs in zip(actor.policy.parameters(), learner_policy.parameters()):
        assert torch.equal(mine, theirs)


def test_finished_episodes_are_reported_once_with_their_returns():
    envs = make_vec_env("CartPole-v1", 1, seed=1)
    policy = build_policy(envs.single_observation_space, envs.single_action_space, ModelConfig(), "ppo")
    spec = UnrollSpec(envs.single_observation_space, policy.action_space, 200, 1)
    port = FakePort(spec, policy)
    actor = Actor(0, 0, envs, policy, port, unroll_length=200, seed=3)
    meta = actor.unroll(0)
    envs.close()
    view = port.slot(0)
    ended = (view["dones"] * view["valid"]).numpy()[:, 0]  # an invalid step is the reset after an episode's end
    assert len(meta.episode_returns) == int(ended.sum()) > 0  # a random CartPole policy falls within 200 steps
    assert meta.invalid_frames == int((1 - view["valid"]).sum())
    assert meta.episode_returns == tuple(float(n) for n in meta.episode_lengths)  # reward 1 per step


def test_its_loop_fills_each_granted_slot_in_turn_and_stops_when_told(actor_and_port):
    actor, port, _ = actor_and_port
    actor.run()
    assert [slot for slot, _ in port.submitted] == [0, 1, 0]
    assert [meta.sequence for _, meta in port.submitted] == [1, 2, 3]
