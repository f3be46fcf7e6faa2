"""GPU-sharing schedulers on the Alibaba 2023 trace beside the reference simulator's published curves.

The FGD paper's simulator (hkust-adsl/kubernetes-scheduler-simulator) publishes every run of its evaluation in
``experiments/analysis/expected_results/analysis_allo_discrete.csv`` (6 policies x 10 seeds x 17 traces, tune
1.3). This script runs Menger's heuristics on the same node and task files over ``--seeds`` seeds and prints,
per policy, the mean allocation (%) at 80-130 % arrived workload for both, the largest gap between the two mean
curves over 80-130 %, and the tasks/s; with ``--policy RUN_DIR`` a trained GpuSharing-v0 policy joins them.
Neither file ships with Menger (the trace has no licence): pass your copies.

    python benchmarks/gpu_sharing.py --nodes openb_node_list_gpu_node.csv --trace openb_pod_list_default.csv
        [--reference analysis_allo_discrete.csv] [--seeds 10] [--policy RUN_DIR ...] [--out DIR]

The orders differ from the reference's (Go's random numbers are not reproduced), so single runs differ; the
means over seeds are what is compared.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import time
from pathlib import Path

import numpy as np

from menger.apps.gpucluster.cluster import ClusterState, task_list
from menger.apps.gpucluster.evaluate import evaluate
from menger.apps.gpucluster.frag import target_workload
from menger.apps.gpucluster.learned import learned_factory
from menger.apps.gpucluster.policies import HEURISTICS
from menger.apps.gpucluster.trace import read_nodes, read_tasks

LEVELS = (80, 90, 100, 110, 120, 130)
REFERENCE_NAMES = {"01-Random": "random", "02-DotProd": "dot-product", "03-GpuClustering": "gpu-clustering",
                   "04-GpuPacking": "gpu-packing", "05-BestFit": "best-fit", "06-FGD": "fgd"}


def reference_curves(path: Path, workload: str) -> dict[str, np.ndarray]:
    """The reference simulator's runs of ``workload`` (a task file's stem), per policy: [seeds, 131]."""
    runs: dict[str, list[list[float]]] = {}
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            if row["workload"] == workload and row["sc_policy"] in REFERENCE_NAMES:
                curve = [float(row[str(p)]) if row.get(str(p)) else np.nan for p in range(131)]
                runs.setdefault(REFERENCE_NAMES[row["sc_policy"]], []).append(curve)
    return {name: np.array(curves) for name, curves in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", required=True)
    parser.add_argument("--trace", required=True)
    parser.add_argument("--reference", help="the reference simulator's analysis_allo_discrete.csv")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--policy", action="append", default=[], help="a GpuSharing-v0 run directory")
    parser.add_argument("--out", default="gpu-sharing-out")
    args = parser.parse_args()
    if args.policy:
        import torch

        torch.set_num_threads(1)  # one small forward per task: a second thread only waits for the first
    nodes = read_nodes(args.nodes)
    tasks = task_list(read_tasks(args.trace), nodes.models)
    state, workload = ClusterState(nodes), target_workload(tasks)
    stem = Path(args.trace).stem
    reference = reference_curves(Path(args.reference), stem) if args.reference else {}
    print(f"{stem}: {len(nodes)} nodes, {nodes.total_gpus} GPUs, {len(tasks)} tasks; seeds {args.seeds}; "
          f"load {os.getloadavg()[0]:.2f}")
    header = "".join(f"{level:>8}" for level in LEVELS)
    print(f"{'policy':<34}{'source':<11}{header}{'max gap 80-130':>16}{'tasks/s':>10}")
    results = {}
    for name in [*HEURISTICS, *args.policy]:
        scheduler = name if name in HEURISTICS else learned_factory(name)
        records = [evaluate(state, tasks, workload, scheduler, seed) for seed in range(args.seeds)]
        ours = np.stack([record.allocation_at() for record in records]).mean(axis=0)
        rate = sum(len(r.placed) for r in records) / sum(r.seconds for r in records)
        label = name if name in HEURISTICS else Path(name).name
        theirs = reference[name].mean(axis=0) if name in reference else None
        gap = float(np.nanmax(np.abs(ours[80:131] - theirs[80:131]))) if theirs is not None else None
        print(f"{label:<34}{'menger':<11}{''.join(f'{ours[level]:8.2f}' for level in LEVELS)}"
              f"{'' if gap is None else f'{gap:.2f}':>16}{rate:>10,.0f}")
        if theirs is not None:
            print(f"{'':<34}{'reference':<11}{''.join(f'{theirs[level]:8.2f}' for level in LEVELS)}"
                  f"   ({len(reference[name])} seeds)")
        results[label] = {"mean_curve": [None if np.isnan(v) else round(float(v), 3) for v in ours],
                          "reference_mean_curve": None if theirs is None else theirs.round(3).tolist(),
                          "max_gap_80_130": gap, "tasks_per_second": rate}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps({"trace": args.trace, "seeds": args.seeds,
                                                  "load": os.getloadavg()[0], "time": time.time(),
                                                  "policies": results}, indent=2))
    print(f"wrote {out / f'{stem}.json'}")


if __name__ == "__main__":
    main()
