"""Population-based training on a simulated 2-node Ray cluster: every member a long-lived Ray actor; a member on a
node that is removed gets a new actor on the other, which resumes from its last checkpoint, and the population
finishes."""
from __future__ import annotations

import threading
import time

import pytest

from menger.tuning.pbt import RayMembers, read_lineage, train_population

BATCH = 4 * 16
SMALL = ["runtime.launcher=threads", "runtime.actors=1", "runtime.envs_per_actor=4", "runtime.unroll_length=16",
         "runtime.learner.device=cpu", "runtime.learner.threads=1", "ppo.epochs=2", "ppo.minibatches=2",
         "log.tensorboard=false", "log.progress=false", "checkpoint.interval_updates=1", "stop.target_return=null",
         "tune={ppo.lr: {log_uniform: [1.0e-4, 1.0e-2]}}"]


@pytest.mark.slow
def test_a_member_on_a_removed_node_resumes_elsewhere_from_its_checkpoint(cluster, tmp_path):
    out = tmp_path / "pbt"
    removed: list[str] = []

    def remove_a_node_once_both_members_have_a_checkpoint():
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            dirs = [out / "members" / f"member-{m:02d}" / "checkpoints" for m in (0, 1)]
            if all(d.is_dir() and len(list(d.glob("ckpt-*"))) >= 2 for d in dirs):
                node = next(iter(cluster.worker_nodes))
                cluster.remove_node(node)
                removed.append(node.node_id)
                return
            time.sleep(0.05)

    # members spread over the nodes, one each, so the removal hits one of them; the other node has room for its
    # new actor
    remover = threading.Thread(target=remove_a_node_once_both_members_have_a_checkpoint, daemon=True)
    remover.start()
    result = train_population("cartpole-ppo", out, 2, [*SMALL, f"stop.env_frames={60 * BATCH}"],
                              ready=30 * BATCH, quantile=0.5, executor=RayMembers(cpus=1))
    remover.join(timeout=5)
    assert removed, "no node was removed: the members finished before both had a checkpoint"
    records = read_lineage(out)
    restarts = [r for r in records if r["event"] == "restart"]
    assert len(restarts) == 1 and "lost" in restarts[0]["why"]
    lost = restarts[0]["member"]
    ready = next(r for r in records if r["event"] == "ready" and r["member"] == lost and r["generation"] == 0)
    assert ready["from_frames"] > 0  # it resumed from a checkpoint, not from scratch
    assert all(m.frames == 60 * BATCH for m in result.members)
