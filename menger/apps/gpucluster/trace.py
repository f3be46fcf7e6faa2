"""The GPU cluster trace's node and task CSV files, read as they are published.

The Alibaba GPU cluster trace of 2023 (``alibaba/clusterdata``, ``cluster-trace-gpu-v2023/csv``; Weng et al.,
"Beware of Fragmentation", USENIX ATC 2023) describes nodes as::

    sn,cpu_milli,memory_mib,gpu,model
    openb-node-0000,64000,262144,2,P100

and tasks (pods) as::

    name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
    openb-pod-0001,6000,12288,1,460,,LS,Running,427061,12902960,427061

``gpu_milli`` is the share of *each* requested GPU in thousandths (a task with ``num_gpu=1, gpu_milli=460``
shares one GPU; ``num_gpu=8, gpu_milli=1000`` takes eight whole ones). ``gpu_spec`` lists the GPU models the
task may run on, separated by ``|``; empty (or a file without the column, as some of the trace's variants are)
means any. The other columns are carried but not needed to schedule.

The files carry no licence, so none ships with Menger: pass the paths of your copies. A row that cannot be read
stops the whole file with a message naming the file, the line and the column; nothing is half loaded.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MILLI = 1000  # a whole GPU in gpu_milli units
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
TASK_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")  # gpu_spec too, where a file has it
WHERE_TO_GET = ("the trace is not shipped (it has no licence): get openb_node_list_gpu_node.csv and "
                "openb_pod_list_*.csv from https://github.com/alibaba/clusterdata/tree/master/"
                "cluster-trace-gpu-v2023/csv")


class TraceError(ValueError):
    """A node or task file cannot be read; the message names the file, line and column."""


@dataclass(frozen=True)
class Nodes:
    """A cluster's machines. Arrays are indexed by node.

    Attributes:
        names: [N] the ``sn`` column.
        cpu_milli: [N] CPU in thousandths of a core.
        memory_mib: [N] memory in MiB.
        gpus: [N] number of GPUs (0 for a CPU-only node).
        model: [N] index into ``models`` of the node's GPU model (-1 for a CPU-only node).
        models: the GPU model names, sorted.
    """

    names: tuple[str, ...]
    cpu_milli: np.ndarray
    memory_mib: np.ndarray
    gpus: np.ndarray
    model: np.ndarray
    models: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.names)

    @property
    def total_gpus(self) -> int:
        return int(self.gpus.sum())


@dataclass(frozen=True)
class Tasks:
    """Tasks in file order. Arrays are indexed by task.

    Attributes:
        names: [T] the ``name`` column.
        cpu_milli: [T] CPU requested, thousandths of a core.
        memory_mib: [T] memory requested, MiB.
        num_gpu: [T] GPUs requested.
        gpu_milli: [T] share of each requested GPU, 0..1000 (0 when ``num_gpu`` is 0).
        gpu_spec: [T] the allowed GPU model names (empty: any model).
    """

    names: tuple[str, ...]
    cpu_milli: np.ndarray
    memory_mib: np.ndarray
    num_gpu: np.ndarray
    gpu_milli: np.ndarray
    gpu_spec: tuple[frozenset[str], ...]

    def __len__(self) -> int:
        return len(self.names)

    @property
    def gpu_demand(self) -> np.ndarray:
        """[T] GPUs requested in milli-GPU: ``num_gpu * gpu_milli``."""
        return self.num_gpu * self.gpu_milli

    def take(self, index: np.ndarray) -> Tasks:
        """The tasks at ``index``, in that order (repeats allowed)."""
        index = np.asarray(index, dtype=np.int64)
        return Tasks(tuple(self.names[i] for i in index), self.cpu_milli[index], self.memory_mib[index],
                     self.num_gpu[index], self.gpu_milli[index], tuple(self.gpu_spec[i] for i in index))


def read_nodes(path: str | Path) -> Nodes:
    """Read a node file (``sn,cpu_milli,memory_mib,gpu,model``)."""
    rows = _read_rows(path, NODE_COLUMNS, "node")
    names, cpu, memory, gpus, model_names = [], [], [], [], []
    seen: dict[str, str] = {}
    for where, row in rows:
        name = row["sn"].strip()
        if name in seen:
            raise TraceError(f"{where}, column 'sn': node {name!r} is already named on {seen[name]}; names must be "
                             "unique.")
        seen[name] = where.rpartition(" ")[2].join(("line ", ""))
        names.append(name)
        cpu.append(_whole(where, row, "cpu_milli", low=1))
        memory.append(_whole(where, row, "memory_mib", low=0))
        gpus.append(_whole(where, row, "gpu", low=0))
        model = row["model"].strip()
        if gpus[-1] > 0 and not model:
            raise TraceError(f"{where}, column 'model': a node with {gpus[-1]} GPUs must name their model.")
        model_names.append(model if gpus[-1] > 0 else "")
    models = tuple(sorted({name for name in model_names if name}))
    index = {name: i for i, name in enumerate(models)}
    return Nodes(tuple(names), np.array(cpu, np.int64), np.array(memory, np.int64), np.array(gpus, np.int64),
                 np.array([index.get(name, -1) for name in model_names], np.int64), models)


def read_tasks(path: str | Path) -> Tasks:
    """Read a task file (``name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,...]``)."""
    rows = _read_rows(path, TASK_COLUMNS, "task")
    names, cpu, memory, num_gpu, gpu_milli, spec = [], [], [], [], [], []
    for where, row in rows:
        names.append(row["name"].strip())
        cpu.append(_whole(where, row, "cpu_milli", low=0))
        memory.append(_whole(where, row, "memory_mib", low=0))
        count = _whole(where, row, "num_gpu", low=0)
        share = _whole(where, row, "gpu_milli", low=0, high=MILLI)
        if count > 0 and share == 0:
            raise TraceError(f"{where}, column 'gpu_milli': a task asking for {count} GPUs must ask for a share "
                             f"of each (1..{MILLI}), found 0.")
        if count > 1 and share < MILLI:
            raise TraceError(f"{where}, column 'gpu_milli': a task asking for {count} GPUs takes them whole "
                             f"(gpu_milli {MILLI}), found {share}; only a single-GPU task may share a GPU.")
        num_gpu.append(count)
        gpu_milli.append(share if count > 0 else 0)
        spec.append(frozenset(part.strip() for part in (row.get("gpu_spec") or "").split("|") if part.strip()))
    return Tasks(tuple(names), np.array(cpu, np.int64), np.array(memory, np.int64), np.array(num_gpu, np.int64),
                 np.array(gpu_milli, np.int64), tuple(spec))


def check_fits(nodes: Nodes, tasks: Tasks, tasks_path: str | Path = "tasks") -> None:
    """Refuse a task file whose GPU models the node file never names: no such task could ever be placed."""
    known = set(nodes.models)
    for name, spec in zip(tasks.names, tasks.gpu_spec):
        if spec and not spec & known:
            raise TraceError(f"{tasks_path}: task {name!r} may run only on GPU models {sorted(spec)}, and the node "
                             f"file has none of them (its models: {sorted(known)}). Pass the node file of the "
                             "same cluster.")


def write_nodes(path: str | Path, nodes: Nodes) -> None:
    """Write ``nodes`` in the trace's node format (for generated clusters and tests)."""
    with Path(path).open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(NODE_COLUMNS)
        for i, name in enumerate(nodes.names):
            model = nodes.models[nodes.model[i]] if nodes.model[i] >= 0 else ""
            writer.writerow([name, nodes.cpu_milli[i], nodes.memory_mib[i], nodes.gpus[i], model])


def write_tasks(path: str | Path, tasks: Tasks) -> None:
    """Write ``tasks`` in the trace's task format; the columns scheduling does not read are filled plainly."""
    with Path(path).open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow((*TASK_COLUMNS, "gpu_spec", "qos", "pod_phase", "creation_time", "deletion_time",
                         "scheduled_time"))
        for i, name in enumerate(tasks.names):
            writer.writerow([name, tasks.cpu_milli[i], tasks.memory_mib[i], tasks.num_gpu[i], tasks.gpu_milli[i],
                             "|".join(sorted(tasks.gpu_spec[i])), "LS", "Running", i, "", i])


def _read_rows(path: str | Path, columns: tuple[str, ...], kind: str) -> list[tuple[str, dict[str, str]]]:
    path = Path(path)
    if not path.is_file():
        raise TraceError(f"{kind} file {str(path)!r} does not exist; {WHERE_TO_GET}.")
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        header = [name.strip() for name in reader.fieldnames or ()]
        missing = [name for name in columns if name not in header]
        if missing:
            raise TraceError(f"{path} line 1: the {kind} file's header lacks {missing}; it must have the columns "
                             f"{','.join(columns)} (found {','.join(header) or 'an empty file'}).")
        reader.fieldnames = header
        rows = []
        for row in reader:
            where = f"{path} line {reader.line_num}"
            if None in row:
                raise TraceError(f"{where}: {len(header) + len(row[None])} fields, the header has {len(header)}.")
            if not any((value or "").strip() for value in row.values()):
                continue
            if any(row[name] is None for name in columns):
                raise TraceError(f"{where}: {sum(v is not None for v in row.values())} fields, the header has "
                                 f"{len(header)}.")
            rows.append((where, row))
    if not rows:
        raise TraceError(f"{path}: no {kind}s found after the header.")
    return rows


def _whole(where: str, row: dict[str, str], column: str, low: int, high: int | None = None) -> int:
    text = row[column].strip()
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value.is_integer():
        raise TraceError(f"{where}, column {column!r}: expected a whole number, found {text!r}.")
    if value < low or (high is not None and value > high):
        bounds = f"{low}..{high}" if high is not None else f"at least {low}"
        raise TraceError(f"{where}, column {column!r}: {int(value)} is out of range ({bounds}).")
    return int(value)
