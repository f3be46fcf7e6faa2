"""Replay under faults (docs/guides/reliability.md, promises 1-3): an actor SIGKILLed while it writes a chunk of the replay
leaves nothing half-written that the learner can sample; its successor writes into its ring and training goes on."""
import os
import signal

import numpy as np

UNROLL, ENVS = 16, 4


def test_an_actor_killed_mid_write_leaves_no_half_written_item_to_sample(harness):
    config = harness.config("runtime.launcher=processes", "runtime.actors=2", f"runtime.unroll_length={UNROLL}",
                            f"runtime.envs_per_actor={ENVS}", "stop.target_return=null", "stop.env_frames=12000",
                            "replay.min_size=256", "replay.max_size=2048", "eval.interval_s=0", preset="cartpole-apex")
    run = harness.start(config)
    coordinator = run.trainer.coordinator
    # the tables are built when the coordinator is attached to the transport, just after the transport exists
    harness.wait_until(lambda: coordinator.tables is not None, 60, "the replay tables")
    violations, batches = [], [0]
    sample = coordinator.tables.sample

    def checked_sample(batch_size, timeout_s):  # every batch: no item from a chunk an actor may be writing
        drawn = sample(batch_size, timeout_s)
        being_written = set(coordinator.granted)
        violations.extend(set(drawn.data["slot"].tolist()) & being_written)
        batches[0] += 1
        return drawn

    coordinator.tables.sample = checked_sample
    harness.wait_until(lambda: run.actors_ready() and run.updates() >= 20, 60, "twenty updates")
    victim = run.trainer.actors[1]
    progress = run.trainer.transport.progress_frames
    harness.wait_until(lambda: int(progress[1]) > 0, 30, "actor 1 mid-unroll", poll_s=0.0002)
    writing = {slot for slot in coordinator.granted if coordinator.owner(slot) == 1}
    os.kill(victim.handle.pid, signal.SIGKILL)
    harness.wait_until(lambda: victim.restarts >= 1, 30, "the dead actor to be noticed")
    harness.wait_until(lambda: coordinator.last_sequence[1] >= 2, 30, "unrolls from the new incarnation")
    result = run.join()
    m = result.final_metrics
    held = coordinator.tables.shard(0).state()["data"]["slot"]
    print(f"killed actor 1 while it wrote chunk(s) {sorted(writing)}; {batches[0]} batches checked; "
          f"restarts={m['actor/restarts']}, replay size {m['replay/size']}")
    assert violations == [], f"sampled items of chunks being written: {violations}"
    assert m["actor/restarts"] == 1 and batches[0] > 20
    assert m["learner/updates"] > 20 and np.isin(held, list(coordinator.slots_of(1))).any()
