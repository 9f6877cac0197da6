"""What every heuristic placer shares: compiled arrays, colocation units, a memory ledger.

Colocation: ops with the same ``colocation`` key form one *unit* that goes to
one device. Partitioning placers (round robin, METIS, stages) move units;
list schedulers (HEFT, ETF, SCT) schedule ops one by one but pin the whole
unit to a device the first time one of its ops is placed, as Baechi does.

Memory: a device holds the weights of its ops plus their outputs, counted
statically (an output is never freed). This is Baechi's ``m-TOPO`` estimate
(persistent + output memory per op): it overestimates the simulator's peak,
so a placement the ledger accepts is never over memory in the simulator.
When no device has room for a unit the placer still places it (on the device
with the most room), records ``meta["memory_estimate_exceeded"]``, and the
simulator gives the verdict (``oom``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from placer.cluster import Cluster
from placer.cost_model import op_time_matrix
from placer.graph import OpGraph
from placer.placement import Placement


@dataclass
class Problem:
    """A graph and a cluster compiled to the arrays the placers read.

    Attributes
    ----------
    times : ``[n, D]`` compute seconds of each op on each device.
    unit : unit id of each op; units are numbered in topological order of
        their first op.
    unit_ops : op indices of each unit.
    op_memory : bytes each op adds to its device (weights + outputs).
    capacity : memory bytes of each device.
    candidates : the devices a homogeneous placer spreads over: the GPUs, or
        every device when the cluster has none.
    """

    graph: OpGraph
    cluster: Cluster
    times: np.ndarray
    out_bytes: np.ndarray
    xfer: np.ndarray
    bandwidth: np.ndarray
    latency: np.ndarray
    unit: np.ndarray
    unit_ops: list[np.ndarray]
    op_memory: np.ndarray
    unit_memory: np.ndarray
    capacity: np.ndarray
    candidates: np.ndarray
    meta: dict = field(default_factory=dict)

    @classmethod
    def build(cls, graph: OpGraph, cluster: Cluster, fuse_chains: bool = False) -> "Problem":
        """Compile `graph` on `cluster`; `fuse_chains` also merges chains into units (`chain_units`)."""
        out_bytes = np.array([op.output_bytes for op in graph.ops], dtype=np.float64)
        params = np.array([op.param_bytes for op in graph.ops], dtype=np.float64)
        xfer = np.array([-1.0 if op.transfer_time is None else op.transfer_time for op in graph.ops])
        bandwidth, latency = cluster.link_matrices()
        gpus = np.array([i for i, d in enumerate(cluster.devices) if d.kind == "gpu"], dtype=np.int64)
        candidates = gpus if gpus.size else np.arange(len(cluster), dtype=np.int64)
        op_memory = params + out_bytes
        unit = colocation_units(graph)
        if fuse_chains:
            smallest = min(cluster.devices[int(d)].memory_bytes for d in candidates)
            unit = chain_units(graph, unit, op_memory, smallest / (2 * len(candidates)))
        num_units = int(unit.max()) + 1
        order = np.argsort(unit, kind="stable")
        bounds = np.searchsorted(unit[order], np.arange(num_units + 1))
        unit_ops = [order[bounds[u]:bounds[u + 1]] for u in range(num_units)]
        unit_memory = np.bincount(unit, weights=op_memory, minlength=num_units)
        return cls(
            graph=graph, cluster=cluster, times=op_time_matrix(graph, cluster), out_bytes=out_bytes,
            xfer=xfer, bandwidth=bandwidth, latency=latency, unit=unit, unit_ops=unit_ops,
            op_memory=op_memory, unit_memory=unit_memory,
            capacity=np.array([d.memory_bytes for d in cluster.devices], dtype=np.float64),
            candidates=candidates,
        )

    @property
    def num_ops(self) -> int:
        return len(self.graph)

    @property
    def num_devices(self) -> int:
        return len(self.cluster)

    @property
    def num_units(self) -> int:
        return len(self.unit_ops)

    def comm_times(self, v: int, src: int) -> np.ndarray:
        """Seconds to send op `v`'s output from device `src` to each device (0 to itself)."""
        if self.xfer[v] >= 0:
            row = np.full(self.num_devices, self.xfer[v])
        else:
            row = self.latency[src] + self.out_bytes[v] / self.bandwidth[src]
        row[src] = 0.0
        return row

    def mean_comm_time(self, devices: np.ndarray | None = None) -> np.ndarray:
        """Each op's mean seconds to send its output between two distinct devices.

        HEFT's mean communication cost: mean latency + bytes / mean bandwidth
        over the ordered pairs of distinct `devices` (all devices by default).
        """
        devs = np.arange(self.num_devices) if devices is None else devices
        if len(devs) < 2:
            return np.where(self.xfer >= 0, self.xfer, 0.0)
        sub_bw = self.bandwidth[np.ix_(devs, devs)]
        sub_lat = self.latency[np.ix_(devs, devs)]
        off = ~np.eye(len(devs), dtype=bool)
        mean_lat = float(sub_lat[off].mean())
        mean_bw = float(sub_bw[off].mean())
        return np.where(self.xfer >= 0, self.xfer, mean_lat + self.out_bytes / mean_bw)

    def unit_topo_order(self) -> np.ndarray:
        """Units in topological order of their first op (unit ids already are)."""
        return np.arange(self.num_units)

    def placement(self, assignment: np.ndarray, method: str, ledger: "MemoryLedger | None" = None,
                  **meta) -> Placement:
        """The placement of `assignment`, with what the placer knows in ``meta``."""
        check_colocation(self, assignment)
        if ledger is not None:
            meta["memory_estimate_exceeded"] = ledger.exceeded
        meta.update(self.meta)
        return Placement.from_assignment(self.graph, self.cluster, assignment, method, meta=meta)


def colocation_units(graph: OpGraph) -> np.ndarray:
    """Unit id per op: ops sharing a colocation key share an id.

    Units are numbered by the topological position of their first op, so
    walking unit ids in order walks the graph front to back.
    """
    n = len(graph)
    key_unit: dict[str, int] = {}
    unit = np.empty(n, dtype=np.int64)
    next_id = 0
    for i in graph.topo_order.tolist():
        key = graph.ops[i].colocation
        if key is None:
            unit[i] = next_id
            next_id += 1
        elif key in key_unit:
            unit[i] = key_unit[key]
        else:
            key_unit[key] = unit[i] = next_id
            next_id += 1
    return unit


def chain_units(graph: OpGraph, unit: np.ndarray, op_memory: np.ndarray, max_memory: float) -> np.ndarray:
    """Merge units along chains: op i joins op j when j is i's only consumer and i is j's only input.

    Baechi's operator fusion: such a pair gains nothing from two devices (j
    cannot start before i ends) and loses a transfer, so placing them as one
    shrinks the problem and stops greedy schedulers from splitting chains.
    A merge that would make a unit heavier than `max_memory` bytes is
    skipped, so fusion never makes a graph unplaceable. Numbering stays in
    topological order of each unit's first op.
    """
    parent = list(range(int(unit.max()) + 1))
    memory = np.bincount(unit, weights=op_memory).tolist()

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    p_off, p_idx = graph.predecessors
    s_off, _ = graph.successors
    indeg, outdeg = np.diff(p_off), np.diff(s_off)
    for j in np.flatnonzero(indeg == 1).tolist():
        i = int(p_idx[p_off[j]])
        if outdeg[i] == 1:
            a, b = find(int(unit[i])), find(int(unit[j]))
            if a != b and memory[a] + memory[b] <= max_memory:
                parent[max(a, b)] = min(a, b)
                memory[min(a, b)] = memory[a] + memory[b]
    root = np.array([find(u) for u in unit.tolist()], dtype=np.int64)
    renumber: dict[int, int] = {}
    out = np.empty_like(root)
    for i in graph.topo_order.tolist():
        out[i] = renumber.setdefault(int(root[i]), len(renumber))
    return out


def check_colocation(problem: Problem, assignment: np.ndarray) -> None:
    """Assert that every unit sits on one device (a placer bug otherwise)."""
    per_unit_min = np.full(problem.num_units, np.iinfo(np.int64).max)
    per_unit_max = np.full(problem.num_units, -1)
    np.minimum.at(per_unit_min, problem.unit, assignment)
    np.maximum.at(per_unit_max, problem.unit, assignment)
    bad = np.flatnonzero(per_unit_min != per_unit_max)
    if bad.size:
        op = problem.graph.ops[int(problem.unit_ops[int(bad[0])][0])]
        raise AssertionError(f"placer split colocation group {op.colocation!r} over devices")


def expand_units(problem: Problem, unit_device: np.ndarray) -> np.ndarray:
    """Device per op from a device per unit."""
    return np.asarray(unit_device, dtype=np.int64)[problem.unit]


class MemoryLedger:
    """Estimated bytes on each device as units are placed.

    Parameters
    ----------
    problem : the compiled problem (unit memory and device capacity).
    limit : bytes allowed per device; the device capacity by default
        (m-TOPO passes a lower, balancing limit).
    """

    def __init__(self, problem: Problem, limit: np.ndarray | None = None):
        self.problem = problem
        self.limit = problem.capacity.copy() if limit is None else np.minimum(limit, problem.capacity)
        self.used = np.zeros(problem.num_devices)
        self.exceeded = False

    def free(self) -> np.ndarray:
        return self.limit - self.used

    def fits(self, unit: int, device: int) -> bool:
        return self.used[device] + self.problem.unit_memory[unit] <= self.limit[device]

    def feasible(self, unit: int, devices: np.ndarray) -> np.ndarray:
        """The subset of `devices` with room for `unit`."""
        return devices[self.used[devices] + self.problem.unit_memory[unit] <= self.limit[devices]]

    def choose(self, unit: int, devices: np.ndarray) -> np.ndarray:
        """Devices with room for `unit`; when none has, the one with the most room.

        Falling back marks the ledger `exceeded`: the placement is then over
        the estimate and the simulator decides whether it is really out of
        memory.
        """
        ok = self.feasible(unit, devices)
        if ok.size:
            return ok
        self.exceeded = True
        return devices[[int(np.argmax(self.problem.capacity[devices] - self.used[devices]))]]

    def charge(self, unit: int, device: int) -> None:
        self.used[device] += self.problem.unit_memory[unit]

    def release(self, unit: int, device: int) -> None:
        self.used[device] -= self.problem.unit_memory[unit]


def fit_to_memory(problem: Problem, unit_device: np.ndarray, devices: np.ndarray) -> tuple[np.ndarray, MemoryLedger]:
    """Move units off devices that are over the memory estimate.

    Partitioning placers (round robin, METIS, stages) choose devices without
    looking at memory; this pass keeps their choice where it fits and, for a
    device over its capacity, moves its last units (in topological order, so
    stages stay nearly contiguous) to the device among `devices` with the
    most room. Returns the new device per unit and the ledger (its
    ``exceeded`` says whether some device is still over the estimate).
    """
    unit_device = np.array(unit_device, dtype=np.int64)
    ledger = MemoryLedger(problem)
    np.add.at(ledger.used, unit_device, problem.unit_memory)
    for d in np.flatnonzero(ledger.used > ledger.limit):
        for u in np.flatnonzero(unit_device == d)[::-1]:
            if ledger.used[d] <= ledger.limit[d]:
                break
            others = devices[devices != d]
            room = ledger.limit[others] - ledger.used[others]
            if not others.size or room.max() < problem.unit_memory[u]:
                continue
            target = int(others[np.argmax(room)])
            ledger.release(int(u), int(d))
            ledger.charge(int(u), target)
            unit_device[u] = target
    ledger.exceeded = bool((ledger.used > ledger.limit).any())
    return unit_device, ledger


def static_levels(problem: Problem, weights: np.ndarray) -> np.ndarray:
    """Longest path from each op to an exit, counting `weights[i]` per op (no communication)."""
    s_off, s_idx = problem.graph.successors
    level = np.zeros(problem.num_ops)
    s_off_l, s_idx_l = s_off.tolist(), s_idx.tolist()
    w = weights.tolist()
    lv = level.tolist()
    for i in problem.graph.topo_order[::-1].tolist():
        best = 0.0
        for j in s_idx_l[s_off_l[i]:s_off_l[i + 1]]:
            if lv[j] > best:
                best = lv[j]
        lv[i] = w[i] + best
    return np.asarray(lv)


def reject_options(method: str, options: dict, allowed: tuple[str, ...] = ()) -> None:
    """Raise a `PlacerError` naming any option `method` does not take."""
    from placer.errors import PlacerError

    unknown = sorted(set(options) - set(allowed))
    if unknown:
        takes = f"; it takes {', '.join(allowed)}" if allowed else "; it takes none"
        raise PlacerError(f"method {method!r}: unknown option(s) {', '.join(unknown)}{takes}")
