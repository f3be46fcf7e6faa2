"""The snapshot store: one copy per host, keyed by content, read by every actor without copying it."""
from __future__ import annotations

import multiprocessing as mp

import numpy as np
import torch
from torch import nn

from menger.league.snapshots import FrozenPolicy, SnapshotStore


def _net(seed=0, width=512):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(width, width), nn.Linear(width, width))


def test_the_same_parameters_are_stored_once_under_one_key(tmp_path):
    store = SnapshotStore(tmp_path)
    a, b = _net(0), _net(1)
    key = store.put(a)
    assert store.put(a) == key and store.put(b) != key
    assert len(store.keys()) == 2
    size = sum(p.numel() for p in a.state_dict().values()) * 4
    assert store.bytes_on_host() == 2 * size


def test_an_opened_snapshot_is_the_file_itself_not_a_copy(tmp_path):
    store = SnapshotStore(tmp_path)
    net = _net(0)
    key = store.put(net)
    params = SnapshotStore(tmp_path).open(key)
    for name, tensor in net.state_dict().items():
        assert torch.equal(params[name], tensor)
    views = {t.untyped_storage().data_ptr() for t in params.values()}
    assert len(views) == 1  # every tensor is a view on one mapping of the file


def test_a_frozen_policy_acts_as_the_network_with_those_parameters(tmp_path):
    from menger.envs.multiagent import MultiAgentVecEnv
    from menger.experiment import ExperimentConfig
    from menger.models import build_policy
    from pettingzoo.classic import connect_four_v3

    env = MultiAgentVecEnv(connect_four_v3.env, 5, seed=0)
    cfg = ExperimentConfig()
    trained = build_policy(env.single_observation_space, env.single_action_space, cfg.model, "ppo")
    with torch.no_grad():
        for p in trained.parameters():
            p.add_(torch.randn_like(p))
    other = build_policy(env.single_observation_space, env.single_action_space, cfg.model, "ppo")
    before = [p.clone() for p in other.parameters()]
    store = SnapshotStore(tmp_path)
    frozen = FrozenPolicy(other, store.open(store.put(trained)), torch.Generator().manual_seed(7))
    obs = env.reset()
    tensors = {k: torch.from_numpy(v).float() for k, v in obs.items()}
    expected = trained.act(tensors, generator=torch.Generator().manual_seed(7)).action.numpy()
    assert np.array_equal(frozen.act(obs), expected)
    assert all(torch.equal(p, q) for p, q in zip(other.parameters(), before))  # the template is left alone


def _read_and_report(directory, key, ready, done, out, release):
    params = SnapshotStore(directory).open(key)
    total = sum(float(t.numpy().sum()) for t in params.values())  # every page touched (numpy: no torch threads after fork)
    ready.put(total)
    done.wait(30)
    out.put(_mapped_pss_kb(directory))
    release.wait(30)  # held until every reader has measured: one that left early would raise the others' shares


def _mapped_pss_kb(directory) -> int:
    """This process's proportional share (kB) of the memory mapped from the store's files."""
    pss, inside = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            if "-" in line.split()[0] and len(line.split()) >= 5:
                inside = str(directory) in line
            elif inside and line.startswith("Pss:"):
                pss += int(line.split()[1])
    return pss


def _host_memory_for(readers: int, directory, key) -> int:
    ctx = mp.get_context("fork")
    ready, out, done, release = ctx.Queue(), ctx.Queue(), ctx.Event(), ctx.Event()
    procs = [ctx.Process(target=_read_and_report, args=(directory, key, ready, done, out, release))
             for _ in range(readers)]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=30)  # all of them hold the snapshot at once
    done.set()
    total = sum(out.get(timeout=30) for _ in procs)
    release.set()
    for p in procs:
        p.join(30)
    return total


def test_snapshot_memory_on_a_host_does_not_grow_with_the_number_of_actors(tmp_path):
    store = SnapshotStore(tmp_path)
    key = store.put(_net(0, width=1024))  # 8 MB
    size_kb = store.bytes_on_host() // 1024
    one, eight = _host_memory_for(1, tmp_path, key), _host_memory_for(8, tmp_path, key)
    assert 0.9 * size_kb <= one <= 1.1 * size_kb
    assert 0.9 * size_kb <= eight <= 1.1 * size_kb  # eight readers share the one copy (8 private copies: 8x)
