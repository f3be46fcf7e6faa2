"""An elastic run on a simulated Ray cluster (`runtime.actors: auto` with `runtime.ray.address`): when a node joins,
more actors start; when it leaves, the extra actors are parked; each change is in autosize.json with its reason.

The start-up measurement is replaced by made-up costs in which the actors are the bottleneck, so the model wants
as many actors as the cluster's CPUs hold (tests check behaviour, not this machine's clock)."""
from __future__ import annotations

import json
import threading

import pytest
from ray_harness import SMALL_RAY_RUN, wait_until

from menger import api
from menger.runtime import Observer, autosize


class Watch(Observer):
    """The running trainer, for the test to look at and stop."""

    def __init__(self):
        self.trainer = None

    def on_start(self, trainer) -> None:
        self.trainer = trainer


def acting_bound_costs(config):
    costs = autosize.Costs(cores=2, launcher="ray", coordination="async", unroll_length=config.runtime.unroll_length,
                           slots_per_actor=config.runtime.coordination.slots_per_actor,
                           actor_step_s={4: 0.01},  # 10 ms a step: the actors set the pace
                           learner_s={1: [(10, 1e-5), (1_000_000, 1e-3)]})
    return costs, 1


def alive(trainer) -> int:
    return trainer.supervisor.metrics()["actor/alive"]


@pytest.mark.slow
def test_actors_start_as_a_node_joins_and_are_parked_as_it_leaves(cluster, tmp_path, monkeypatch):
    monkeypatch.setattr(autosize, "measure", lambda config, budget_s=autosize.BUDGET_S: acting_bound_costs(config))
    watch, outcome = Watch(), {}
    settings = [*SMALL_RAY_RUN, "runtime.actors=auto", f"runtime.ray.address={cluster.address}",
                "runtime.ray.actor_cpus=1", "runtime.coordination.batch_unrolls=0", "stop.target_return=null",
                "stop.env_frames=1000000000", "stop.wall_clock_s=240"]
    run_dir = tmp_path / "run"

    def train():
        try:
            outcome["result"] = api.train("cartpole-impala", settings, run_dir=str(run_dir), observers=[watch])
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            outcome["error"] = exc

    thread = threading.Thread(target=train, daemon=True)
    thread.start()
    try:
        wait_until(lambda: watch.trainer is not None and alive(watch.trainer) == 4, 120, "4 actors on 4 CPUs")
        trainer = watch.trainer
        report = json.loads((run_dir / autosize.REPORT_FILE).read_text())
        assert report["picked"]["actors"] == 4 and report["pool"] == 8 and report["actor_cores"] == 4
        assert len(trainer.supervisor.actors) == 8 and trainer.supervisor.active == 4

        node = cluster.add_node(num_cpus=2)
        wait_until(lambda: trainer.supervisor.active == 6 and alive(trainer) == 6, 90, "6 actors after a node joined")
        updates = trainer.learner.updates
        wait_until(lambda: trainer.learner.updates > updates + 2, 60, "updates with 6 actors")

        cluster.remove_node(node)
        wait_until(lambda: trainer.supervisor.active == 4, 90, "4 actors after the node left")
        updates = trainer.learner.updates
        wait_until(lambda: trainer.learner.updates > updates + 2 and alive(trainer) == 4, 90,
                   "updates with 4 actors again")
    finally:
        if watch.trainer is not None:
            watch.trainer.request_stop()
        thread.join(120)
    assert not thread.is_alive(), "the run did not stop"
    if "error" in outcome:
        raise outcome["error"]
    adjustments = json.loads((run_dir / autosize.REPORT_FILE).read_text())["adjustments"]
    joined, left = [a for a in adjustments if "actors" in a]
    assert joined["actors"] == [4, 6] and "nodes joined" in joined["reason"] and "6 actors of 1 CPU(s) fit" in \
        joined["reason"]
    assert left["actors"] == [6, 4] and "nodes left" in left["reason"]
    metrics = outcome["result"].final_metrics
    assert metrics["actor/parked"] == 4 and metrics["actor/given_up"] == 0
