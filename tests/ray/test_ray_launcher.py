"""The ray launcher on a simulated 2-3 node cluster: parameter fan-out, a killed actor, a removed node, learning,
central inference.

The tests share one cluster (see conftest.py); the one that removes a node adds its own node first, so the
others keep theirs.
"""
from __future__ import annotations

import pytest

ray = pytest.importorskip("ray")

from ray_harness import SMALL_RAY_RUN, TrainerInThread, ray_config, wait_until  # noqa: E402

from menger import api  # noqa: E402
from menger.runtime.actors import make_actor  # noqa: E402


def _live_placement(trainer, actor_ids=None) -> dict[int, str]:
    """actor id -> the node its current incarnation runs on (actors that died meanwhile are left out)."""
    states = dict(trainer.transport.actors)
    refs = {actor_id: state.handle.actor.where.remote() for actor_id, state in states.items()
            if actor_ids is None or actor_id in actor_ids}
    placement = {}
    for actor_id, ref in refs.items():
        try:
            placement[actor_id] = ray.get(ref, timeout=30)
        except ray.exceptions.RayError:
            pass
    return placement


def test_params_cross_the_network_once_per_node_not_per_actor(cluster, tmp_path):
    config = ray_config("runtime.actors=4", "stop.env_frames=4096", "stop.target_return=null")
    run = TrainerInThread(config, tmp_path / "fanout")
    wait_until(lambda: run.updates() >= 1, 120, "the first update")
    nodes = set(_live_placement(run.trainer).values())
    metrics = run.join(120).final_metrics
    param_bytes = run.trainer.transport.params.nbytes
    print(f"actors on {len(nodes)} nodes: copies_per_version={metrics['params/copies_per_version']}, "
          f"bytes_per_version={metrics['params/bytes_per_version']:.0f} ({param_bytes} per copy), "
          f"cache_reads={metrics['params/cache_reads']}")
    assert len(nodes) == 2  # SPREAD puts the 4 actors on both worker nodes
    # one copy per node, not one per actor (4); a node may miss only the version published as the run stopped
    copies = metrics["params/copies_per_version"]
    assert 2.0 - 2.0 / max(2, metrics["learner/updates"]) <= copies <= 2.0
    assert metrics["params/bytes_per_version"] == pytest.approx(copies * param_bytes)
    assert metrics["params/cache_reads"] >= 4 * (metrics["learner/updates"] - 1)  # every actor read every version
    assert metrics["transport/frames_dropped"] == 0 and metrics["transport/duplicates"] == 0
    assert metrics["learner/policy_lag_max"] == 0  # sync PPO stays on-policy on Ray


def test_killed_ray_actor_is_restarted_as_a_new_incarnation(cluster, tmp_path):
    config = ray_config("runtime.actors=2", "stop.env_frames=6144", "stop.target_return=null")
    run = TrainerInThread(config, tmp_path / "kill")
    wait_until(lambda: run.updates() >= 2, 120, "two updates")
    victim = run.trainer.actors[0]
    ray.kill(run.trainer.transport.actors[0].handle.actor, no_restart=True)
    recovered_s = wait_until(lambda: victim.incarnation == 1 and victim.handle is not None, 60, "a restart")
    updates_at_restart = run.updates()
    metrics = run.join(180).final_metrics
    print(f"restart seen {recovered_s:.2f} s after the kill; frames lost {metrics.get('transport/frames_dropped')}")
    assert victim.restarts == 1 and victim.incarnation == 1
    assert metrics["actor/restarts"] == 1
    assert metrics["learner/updates"] > updates_at_restart  # the new incarnation's unrolls were learned from
    assert metrics["transport/frames_dropped"] <= 2 * 4 * 32  # at most its in-flight unroll(s)
    assert metrics["transport/duplicates"] == 0


@pytest.mark.slow
def test_cartpole_ppo_reaches_475_on_the_ray_launcher(cluster, tmp_path):
    result = api.train("cartpole-ppo", overrides=[*SMALL_RAY_RUN, "runtime.actors=2", "runtime.envs_per_actor=8",
                                                  "runtime.unroll_length=64", "runtime.seed=1"],
                       run_dir=str(tmp_path / "learn"))
    print({k: v for k, v in result.final_metrics.items() if k.startswith(("time/", "episode/", "params/"))})
    assert result.reached_target, result.final_metrics
    assert result.final_metrics["episode/return_mean"] >= 475


@pytest.mark.slow
def test_removing_a_node_mid_run_reschedules_its_actors_and_training_goes_on(cluster, tmp_path):
    cluster.add_node(num_cpus=2)
    cluster.wait_for_nodes()
    # a long wall-clock limit: the test stops the run itself once it has seen what it needs (a slow machine must
    # not end the run before the replacements deliver)
    config = ray_config("runtime.actors=4", "stop.env_frames=100000000", "stop.wall_clock_s=600",
                        "stop.target_return=null", preset="cartpole-impala")
    run = TrainerInThread(config, tmp_path / "node")
    wait_until(lambda: run.updates() >= 3, 120, "three updates")
    placement = _live_placement(run.trainer)
    workers = {node.node_id: node for node in cluster.worker_nodes}
    doomed = max((n for n in set(placement.values()) if n in workers), key=list(placement.values()).count)
    moved = [actor_id for actor_id, node in placement.items() if node == doomed]
    incarnations = {i: run.trainer.actors[i].incarnation for i in moved}
    cluster.remove_node(workers[doomed])
    frames_at_removal = run.trainer.accounts.accepted
    back_s = wait_until(lambda: all(run.trainer.actors[i].incarnation > incarnations[i]
                                    and run.trainer.coordinator.last_sequence[i] > 0 for i in moved), 180,
                        f"new incarnations of actors {moved} to deliver unrolls")
    after = _live_placement(run.trainer, moved)
    updates_back = run.updates()
    wait_until(lambda: run.updates() >= updates_back + 3, 120, "three more updates after the replacements")
    run.trainer.request_stop()
    metrics = run.join(120).final_metrics
    print(f"node with actors {moved} removed; their new incarnations delivered within {back_s:.1f} s; "
          f"restarts={metrics['actor/restarts']}, frames lost={metrics.get('transport/frames_dropped/actor_lost', 0)}, "
          f"frames {frames_at_removal} at the removal, {metrics['time/env_frames']} at the end")
    assert metrics["actor/restarts"] >= len(moved)
    assert doomed not in after.values()  # the replacements run on the remaining nodes
    assert metrics["time/env_frames"] > frames_at_removal  # training went on after losing a node
    assert metrics["transport/frames_dropped/actor_lost"] > 0  # the partial unrolls of the lost actors, counted
    assert metrics["transport/duplicates"] == 0


def test_central_actions_on_ray_match_local_inference(cluster):
    """The same seeded sampling as `Policy.act`, through the request socket, the mailbox and the driver's forward;
    a new version is picked up before the next forward."""
    import gymnasium as gym
    import numpy as np
    import torch

    from menger.experiment import ModelConfig
    from menger.inference.ray import RayInference
    from menger.models import build_policy

    torch.manual_seed(0)
    policy = build_policy(gym.spaces.Box(-1.0, 1.0, (4,)), gym.spaces.Discrete(3), ModelConfig(hidden=(16, 16)))
    published = {"now": (3, torch.nn.utils.parameters_to_vector(policy.parameters()).detach().numpy().copy())}
    service = RayInference(policy, lambda: published["now"], torch.device("cpu"), max_requests=1, timeout_s=0.0,
                           seed=5).start()
    try:
        client = service.client().actions_for(0, params=None)
        generator = torch.Generator().manual_seed(5)
        for step in range(3):
            if step == 2:
                with torch.no_grad():
                    for p in policy.parameters():
                        p.add_(0.1)
                published["now"] = (4, torch.nn.utils.parameters_to_vector(policy.parameters()).detach().numpy())
            obs = torch.randn(8, 4)
            local = policy.act(obs, None, generator=generator)
            central = client.act(obs, None)
            assert torch.equal(central.action, local.action)
            np.testing.assert_allclose(central.logp.numpy(), local.logp.numpy(), rtol=1e-5, atol=1e-6)
        assert service.version == 4 and service.requests_answered == 3
    finally:
        service.close()


def test_central_inference_on_the_ray_launcher_acts_for_every_actor_step(cluster, tmp_path):
    config = ray_config("runtime.actors=2", "runtime.inference.mode=central", "stop.env_frames=2048",
                        "stop.target_return=null")
    run = TrainerInThread(config, tmp_path / "central")
    metrics = run.join(180).final_metrics
    service = run.trainer.inference
    print({k: round(v, 2) for k, v in metrics.items() if k.startswith("inference/")},
          f"requests answered {service.requests_answered}, frames produced {metrics['time/env_frames_produced']}")
    # every env step of every actor was acted by the service: one request per actor step (B envs)
    assert service.requests_answered * config.runtime.envs_per_actor >= metrics["time/env_frames_produced"]
    assert metrics["time/env_frames"] >= 2048 and service.error is None
    # the means are per interval, and the run's last interval may have served none: the run's totals
    requests, forwards = metrics["inference/requests"], metrics["inference/forwards"]
    assert forwards > 0 and 1.0 <= requests / forwards <= 2.0
    assert 1 <= metrics["inference/version"] <= metrics["learner/version"]  # it followed the published versions
    assert metrics["learner/policy_lag_max"] == 0 and metrics["transport/duplicates"] == 0


@pytest.mark.slow
def test_cartpole_ppo_reaches_475_with_central_inference_on_the_ray_launcher(cluster, tmp_path):
    result = api.train("cartpole-ppo", overrides=[*SMALL_RAY_RUN, "runtime.inference.mode=central", "runtime.actors=2",
                                                  "runtime.envs_per_actor=8", "runtime.unroll_length=64",
                                                  "runtime.seed=1"],
                       run_dir=str(tmp_path / "learn-central"))
    m = result.final_metrics
    print({k: v for k, v in m.items() if k.startswith(("time/", "episode/", "inference/"))})
    assert result.reached_target, m
    assert m["episode/return_mean"] >= 475 and m["inference/requests"] > 0  # the last interval's rate may be 0


@pytest.mark.slow
def test_cartpole_apex_learns_from_replay_sharded_per_node_on_the_ray_launcher(cluster, tmp_path):
    """Ape-X on Ray with one replay shard per node: each node's shard holds the observations its actors wrote,
    the learner holds the index and the per-step fields, and still learns to 475."""
    result = api.train("cartpole-apex", overrides=[*SMALL_RAY_RUN, "runtime.actors=2", "runtime.envs_per_actor=4",
                                                   "runtime.unroll_length=16", "runtime.seed=1", "replay.shards=2"],
                       run_dir=str(tmp_path / "apex"))
    m = result.final_metrics
    print({k: v for k, v in m.items() if k.startswith(("time/", "eval/", "replay/size", "replay/node", "replay/bytes",
                                                       "replay/shard"))})
    assert result.reached_target, m
    assert m["eval/return_mean"] >= 475 and m["replay/size"] > 0
    nodes = [k for k in m if k.startswith("replay/node") and k.endswith("_bytes")]
    assert m["replay/nodes"] == 2 and len(nodes) == 2, m  # SPREAD put one actor on each worker node
    assert all(m[k] > 0 for k in nodes)
    per_chunk = 17 * 4 * 4 * 4  # (T + 1) x B x 4 floats of CartPole observations
    assert sum(m[k] for k in nodes) % per_chunk == 0 and m["replay/shard_bytes"] == sum(m[k] for k in nodes)
    assert m["replay/shard0/size"] > 0 and m["replay/shard1/size"] > 0, m

def test_a_lost_replay_shard_takes_only_its_chunks_and_training_goes_on(cluster, tmp_path):
    """A node's replay shard dies (as with its node): the chunks it held leave the tables, the batch that touched
    it goes on with the other node's items, and the node's actors fill a new shard there."""
    config = ray_config("runtime.actors=2", "runtime.unroll_length=16", "replay.shards=2", "stop.env_frames=100000000",
                        "stop.wall_clock_s=600", "stop.target_return=null", "eval.interval_s=60",
                        preset="cartpole-apex")
    run = TrainerInThread(config, tmp_path / "shard")
    chunks = lambda: run.trainer.transport.chunks  # noqa: E731
    wait_until(lambda: run.updates() >= 20 and chunks() is not None and len(chunks().shards) == 2, 120,
               "20 updates with a shard on each node")
    doomed = chunks().nodes[0]
    held = sum(1 for node in chunks().location.values() if node == doomed)
    ray.kill(chunks().shards[doomed])
    updates_at_kill = run.updates()
    wait_until(lambda: run.trainer.coordinator._lost_chunks > 0, 60, "the lost shard to be noticed")
    wait_until(lambda: run.updates() >= updates_at_kill + 50 and doomed in chunks().shards, 120,
               "50 more updates and a new shard on the node")
    run.trainer.request_stop()
    metrics = run.join(120).final_metrics
    print(f"killed the shard on node {doomed[:8]} holding {held} chunks; lost {metrics['replay/chunks_lost']}; "
          f"updates {updates_at_kill} at the kill, {metrics['learner/updates']} at the end")
    assert 0 < metrics["replay/chunks_lost"]
    assert metrics["learner/updates"] >= updates_at_kill + 50
    assert metrics["replay/nodes"] == 2 and metrics["replay/size"] > 0


def test_a_replay_saved_from_the_node_shards_resumes_with_its_chunks(cluster, tmp_path):
    """The checkpoint fetches each held chunk's observations from its node's shard, in one host's slot layout;
    a resumed Ray run puts them back in a shard and samples them on."""
    from menger.checkpoint import CheckpointManager, unflatten_state

    run_dir = tmp_path / "run"
    first = api.train("cartpole-apex", overrides=[*SMALL_RAY_RUN, "runtime.actors=2", "runtime.unroll_length=16",
                                                  "replay.shards=2", "replay.min_size=500", "eval.interval_s=0",
                                                  "stop.env_frames=2000"], run_dir=str(run_dir)).final_metrics
    checkpoint = CheckpointManager(run_dir / "checkpoints").load_latest()
    replay = unflatten_state(checkpoint.tensors, checkpoint.metadata)["replay"]
    held = [slot for ring in replay["ring"] for slot in ring]
    obs = replay["chunks"]["obs"]
    assert held and first["replay/nodes"] == 2
    assert all(obs[slot].abs().sum() > 0 for slot in held)  # every held chunk's observations came back
    resumed = api.resume(run_dir, overrides=["stop.env_frames=4000"]).final_metrics
    assert resumed["replay/inserts"] >= first["replay/inserts"] + 1500
    assert resumed["replay/size"] >= first["replay/size"] and resumed["learner/updates"] > first["learner/updates"]
    assert resumed["replay/chunks_lost"] == 0  # the restored chunks were found where the learner put them


def test_r2d2_sequences_are_sharded_per_node_and_resume_with_their_stored_states(cluster, tmp_path):
    """R2D2 on Ray: each node's shard holds its actors' observations, sequence batches are gathered from both
    (windows of W + 1 steps), the stored states travel with the per-step fields, and a resumed run samples the
    saved sequences on."""
    from menger.checkpoint import CheckpointManager, unflatten_state

    run_dir = tmp_path / "r2d2"
    first = api.train("cartpole-novel-r2d2", overrides=[*SMALL_RAY_RUN, "runtime.actors=2", "replay.shards=2",
                                                        "replay.min_size=64", "eval.interval_s=0",
                                                        "stop.env_frames=6000"], run_dir=str(run_dir)).final_metrics
    assert first["learner/updates"] > 0 and first["replay/nodes"] == 2, first
    assert first["replay/shard0/size"] > 0 and first["replay/shard1/size"] > 0
    replay = unflatten_state(*(lambda c: (c.tensors, c.metadata))(
        CheckpointManager(run_dir / "checkpoints").load_latest()))["replay"]
    held = [slot for ring in replay["ring"] for slot in ring]
    assert held and all(replay["chunks"]["obs"][slot].abs().sum() > 0 for slot in held)
    assert any(replay["chunks"]["core_states"][slot].abs().sum() > 0 for slot in held)  # states mid-episode
    resumed = api.resume(run_dir, overrides=["stop.env_frames=12000"]).final_metrics
    assert resumed["learner/updates"] > first["learner/updates"] and resumed["replay/chunks_lost"] == 0
    assert resumed["replay/inserts"] > first["replay/inserts"]


def test_a_cache_answers_with_the_newest_version_announced_not_the_older_one_offered(cluster):
    """A grant goes out before the update it waits on: the actor's read at the start of the unroll must see the
    version published since (announced to the cache), not the one the grant carried."""
    import asyncio

    import numpy as np

    from menger.params.caches import ParameterCache

    async def calls():  # its methods, called here in order (Ray runs an actor's calls in the order sent)
        cache = ParameterCache()
        old, new = [ray.put(np.zeros(3, np.float32))], [ray.put(np.ones(3, np.float32))]
        await cache.announce(7, new)
        version, local = await cache.read(6, old)  # the unroll was granted at version 6
        assert version == 7 and np.array_equal(ray.get(local[0]), np.ones(3))
        assert await cache.read(7, new) == (7, local) and cache.stats()["fetches"] == 1  # each version fetched once
        await cache.announce(5, old)  # an announcement that arrives late never goes back
        assert (await cache.read(5, old))[0] == 7 and cache.stats()["fetches"] == 1

    asyncio.run(calls())


def test_an_unroll_granted_before_a_publish_acts_with_the_published_version(cluster, tmp_path):
    """Two unrolls granted at version 0, then version 1 published while the first is still being written: the
    second starts on version 1, as an actor on shared memory would (it reads the newest version at each unroll)."""
    import gymnasium as gym
    import torch

    from menger.launch import make_launcher
    from menger.models import build_policy
    from menger.transport import UnrollSpec

    config = ray_config("runtime.envs_per_actor=2", "runtime.unroll_length=3000", preset="cartpole-impala")
    probe = gym.make("CartPole-v1")
    obs_space, action_space = probe.observation_space, probe.action_space
    policy = build_policy(obs_space, action_space, config.model, config.algo)
    transport = make_launcher(config.runtime).make_transport(UnrollSpec(obs_space, action_space, 3000, 2), policy, 2)
    try:
        transport.publish(policy, 0)
        transport.start_actor(0, dict(build=make_actor, actor_id=0, incarnation=0, config=config, seed=1))
        assert transport.grant(0, 0) and transport.grant(0, 1)
        with torch.no_grad():
            for p in policy.parameters():
                p.add_(0.5)
        transport.publish(policy, 1)  # the first unroll (3000 steps) is far from done: the second is still queued
        versions = {}
        wait_until(lambda: versions.update({m[1]: m[2].policy_version for _, m in transport.receive(0.1)
                                            if m[0] == "unroll"}) or len(versions) == 2, 120, "both unrolls")
        assert versions[1] == 1, versions
    finally:
        transport.shutdown([])


@pytest.mark.slow
def test_impala_on_ray_acts_as_close_to_the_learner_as_on_processes(cluster, tmp_path):
    """cartpole-impala, same seed and frame budget on both launchers: an unroll on Ray is no more versions behind
    the learner than one on shared memory (before the caches were told of each publish it was always 2)."""
    budget = ["runtime.seed=1", "runtime.learner.threads=1", "stop.env_frames=50000", "stop.target_return=null",
              "log.tensorboard=false", "log.progress=false", "checkpoint.interval_s=0"]
    lag = {}
    for launcher in ("processes", "ray"):
        result = api.train("cartpole-impala", overrides=[*budget, f"runtime.launcher={launcher}"],
                           run_dir=str(tmp_path / launcher))
        lag[launcher] = result.final_metrics["learner/policy_lag_mean"]
    print(f"policy lag mean: {lag}")
    assert lag["ray"] <= max(1.5, lag["processes"] + 0.5), lag


def test_idle_actors_on_a_node_ray_reports_dead_are_closed_and_silence_counts_only_calls():
    """An actor with no call in flight shows no failure when its node dies: the transport's look at the live nodes
    (`NodeWatch`, every NODE_LOOK_S) tells the supervisor of it. And only an actor working on a call can be silent."""
    import time
    from types import SimpleNamespace

    import numpy as np

    from menger.transport import ray as ray_transport

    transport = ray_transport.RayTransport.__new__(ray_transport.RayTransport)  # its bookkeeping only: no Ray
    transport.actors, transport.ended, transport.in_flight, transport.snapshots = {}, set(), {}, {}
    transport.busy_since, transport.nodes_seen = np.full(3, np.inf), 0
    transport.nodes = SimpleNamespace(dead={"n2"}, looks=1, start=lambda: None)  # n2 is gone
    for actor_id, node in enumerate(["n1", "n2", "n2"]):
        handle = ray_transport.RayActorHandle(object(), started_at=0.0, stop=lambda actor: None)
        transport.actors[actor_id] = ray_transport.ActorState(handle, last_progress=time.time() - 60, node=node)
    transport.actors[2].calls.append("a call in flight")
    transport._watch(2)
    assert transport.silent(30.0) == [2]  # 0 and 1 are idle: not silent, however long ago they returned
    assert sorted(transport.closed()) == [1, 2]
    assert [transport.actors[a].handle.is_alive() for a in range(3)] == [True, False, False]
    transport.nodes.dead = {"n1", "n2"}  # n1 is gone too, but the watch has not looked again: nothing new
    assert sorted(transport.closed()) == [1, 2]
    transport.nodes.looks = 2
    assert sorted(transport.closed()) == [0, 1, 2]
    transport.release(1)
    assert sorted(transport.closed()) == [0, 2] and transport.busy_since[1] == np.inf


def test_the_node_watch_asks_ray_in_its_own_thread_and_stops_and_actors_nodes_are_learned_from_where(cluster):
    import time
    from types import SimpleNamespace

    from menger.transport import ray as ray_transport
    from menger.transport.ray import NodeWatch

    transport = ray_transport.RayTransport.__new__(ray_transport.RayTransport)  # its bookkeeping only
    transport.actors, transport.ended, transport.nodes_seen = {}, set(), 0
    transport.nodes = SimpleNamespace(dead={"n2"}, looks=1, start=lambda: None)
    for actor_id, node in enumerate(["n1", "n2"]):  # where() answered, as an object the learner has not fetched
        handle = ray_transport.RayActorHandle(object(), started_at=0.0, stop=lambda actor: None)
        transport.actors[actor_id] = ray_transport.ActorState(handle, last_progress=0.0, node_ref=ray.put(node))
    assert transport.closed() == [1] and [transport.actors[a].node for a in (0, 1)] == ["n1", "n2"]

    watch = NodeWatch(every_s=0.05)
    watch.start()
    wait_until(lambda: watch.looks >= 2, 30, "two looks at the nodes")
    live = {node["NodeID"] for node in ray.nodes() if node["Alive"]}
    assert len(live) >= 3 and not watch.dead & live  # a node removed by an earlier test may be among the dead
    watch.stop()
    looks = watch.looks
    time.sleep(0.2)
    assert watch.looks == looks and not watch._thread.is_alive()
