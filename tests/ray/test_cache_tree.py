"""Menger's tree of parameter caches (`runtime.ray.cache_fanout`) on the simulated cluster of conftest.py (a head
and two worker nodes): the learner tells at most F caches, every version reaches every node's cache, a killed cell
is routed around, and a run on the tree learns with its copies counted."""
from __future__ import annotations

import time

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from ray_harness import TrainerInThread, ray_config, wait_until  # noqa: E402

from menger.config import ConfigError  # noqa: E402
from menger.experiment import load_experiment  # noqa: E402
from menger.params.caches import (  # noqa: E402
    NODE_KEY, PUSH_WAIT_S, CacheProcess, ParameterCache, ParameterCaches, cell_groups)


def test_cells_group_the_caches_below_them_until_the_learner_tells_at_most_the_fanout():
    assert cell_groups(8, 0) == [] and cell_groups(3, 4) == []
    assert cell_groups(5, 2) == [[[0, 1], [2, 3], [4]], [[0, 1], [2]]]  # the learner tells the last 2
    for count, fanout in [(8, 2), (64, 8), (256, 16), (300, 16), (1000, 10)]:
        tiers, below = cell_groups(count, fanout), count
        for groups in tiers:  # every cache below has one cell, and no cell more than `fanout` children
            assert sorted(child for group in groups for child in group) == list(range(below))
            assert all(1 <= len(group) <= fanout for group in groups)
            below = len(groups)
        assert below <= fanout
    with pytest.raises(ValueError, match="chain"):
        cell_groups(4, 1)
    with pytest.raises(ConfigError, match="cache_fanout=1"):
        load_experiment("cartpole-impala", ["runtime.ray.cache_fanout=1"])


def _versions(caches: ParameterCaches) -> dict[str, int]:
    """The version each live cache holds (a dead cell's last counters stay in `stats()`)."""
    caches.stats(wait_s=10.0)
    live = set(caches.by_node) | set(caches.cells)
    return {stats["name"]: stats["version"] for stats in caches.stats(wait_s=10.0) if stats["name"] in live}


def test_a_version_goes_down_the_tree_and_a_killed_cell_is_routed_around(cluster):
    caches = ParameterCaches(fanout=2)
    try:
        nodes = caches.refresh()
        assert len(nodes) == 3 and len(caches.cells) == 2 and len(caches.roots) == 2  # [[n0, n1], [n2]]
        published = []
        for version in range(3):
            published.append([ray.put(np.full(1000, version, np.float32))])
            caches.announce(version, published[-1])
            wait_until(lambda: set(_versions(caches).values()) == {version}, 60, f"version {version} everywhere")
        stats = {s["name"]: s for s in caches.stats(wait_s=10.0)}
        # the learner sent each version to the two cells only; the node caches fetched from their cell
        assert sum(s["fetches_from_learner"] for s in stats.values()) == 2 * 3
        assert all(stats[node]["fetches_from_learner"] == 0 and stats[node]["fetches"] == 3 for node in nodes)

        first_cell = caches.parent[sorted(nodes)[0]]
        orphans = [node for node in nodes if caches.parent[node] == first_cell]
        ray.kill(caches.cells[first_cell], no_restart=True)
        # before the driver notices, an actor's read on an orphan falls back to the learner's offer
        published.append([ray.put(np.full(1000, 3, np.float32))])
        version, local = ray.get(nodes[orphans[0]].read.remote(NODE_KEY, 3, published[-1]), timeout=30)
        assert version == 3 and ray.get(local[0])[0] == 3
        # it waited PUSH_WAIT_S for the push that never came, once: its next read does not wait again
        published.append([ray.put(np.full(1000, 4, np.float32))])
        began = time.monotonic()
        assert ray.get(nodes[orphans[0]].read.remote(NODE_KEY, 4, published[-1]), timeout=30)[0] == 4
        assert time.monotonic() - began < PUSH_WAIT_S
        assert ray.get(nodes[orphans[0]].stats.remote())[NODE_KEY]["late"] == 1
        wait_until(lambda: bool(caches.stats(wait_s=1.0) or True) and first_cell not in caches.cells, 60,
                   "the dead cell noticed (the driver asks for stats every log interval)")
        assert caches.rerouted == len(orphans) and all(caches.parent[node] is None for node in orphans)
        for version in (4, 5):
            if version == 5:
                published.append([ray.put(np.full(1000, 5, np.float32))])
            caches.announce(version, published[version])
            wait_until(lambda: set(_versions(caches).values()) == {version}, 60, f"version {version} after the kill")
        stats = {s["name"]: s for s in caches.stats(wait_s=10.0)}
        assert all(stats[node]["fetches_from_learner"] >= 1 for node in orphans)  # told by the learner now
    finally:
        caches.kill_all()


def test_a_late_push_is_pulled_from_the_cache_above_not_the_learner(cluster):
    """A tree that is slow (a push not here in PUSH_WAIT_S) still costs the learner only its fan-out: the late
    read pulls the version from the cell above, which hands over its copy, or fetches it first if it lacks it."""
    import asyncio

    cell = ray.remote(CacheProcess).options(num_cpus=0).remote(["cell-0-0"], True)
    offers = [[ray.put(np.full(100, version, np.float32))] for version in range(3)]

    async def calls():
        node = ParameterCache(push=True)
        node.follow((cell, "cell-0-0"))  # the cell has not adopted it: no push ever comes down to it
        await asyncio.wrap_future(cell.announce.remote("cell-0-0", 0, offers[0]).future())
        version, local = await node.read(0, offers[0])  # the cell has version 0: its copy
        assert version == 0 and ray.get(local[0])[0] == 0
        version, local = await node.read(1, offers[1])  # the cell lacks version 1: it fetches the offer, then hands
        assert version == 1 and ray.get(local[0])[0] == 1
        return node.stats()

    try:
        node = asyncio.run(calls())
        above = ray.get(cell.stats.remote(), timeout=30)["cell-0-0"]
        assert node["late"] == 2 and node["pulls"] == 2 and node["fallbacks"] == 0
        assert node["fetches"] == 2 and node["fetches_from_learner"] == 0  # both from the cell's copies
        assert above["fetches_from_learner"] == 2  # each version sent once by the learner, to the cell
    finally:
        ray.kill(cell)


def test_a_run_on_a_cache_tree_learns_and_the_learner_sends_each_version_to_the_fanout(cluster, tmp_path):
    config = ray_config("runtime.actors=4", "runtime.ray.cache_fanout=2", "stop.env_frames=4096",
                        "stop.target_return=null")
    run = TrainerInThread(config, tmp_path / "tree")
    metrics = run.join(180).final_metrics
    print({key: value for key, value in metrics.items() if key.startswith("params/")})
    assert metrics["learner/updates"] >= 2
    assert metrics["params/caches"] == 5  # three nodes and two cells
    assert 0 < metrics["params/learner_copies_per_version"] <= 2.0
    assert metrics["transport/frames_dropped"] == 0 and metrics["transport/duplicates"] == 0
    assert metrics["learner/policy_lag_max"] == 0  # the tree keeps sync PPO on-policy
