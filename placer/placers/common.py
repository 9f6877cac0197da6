"""What every heuristic placer shares: compiled arrays, colocation units, a memory ledger.

Colocation: ops with the same ``colocation`` key form one *unit* that goes to
one device. Partitioning placers (round robin, METIS, stages) move units;
list schedulers (HEFT, ETF, SCT) schedule ops one by one but pin the whole
unit to a device the first time one of its ops is placed, as Baechi does.

Memory: a device holds the weights of its ops plus the tensors alive on it.
Counting every output as alive forever (Baechi's static ``m-TOPO`` estimate)
overstates a training step's peak several times over (ResNet-50 at batch 32:
27 GB of outputs, a 4.5 GB peak), so the placers use two sharper estimates:
list schedulers (HEFT, m-ETF, m-SCT) follow their own schedule with
`LiveMemory` (a tensor lives until its last consumer is scheduled, as
Baechi's m-ETF counts), and partitioners check their choice with the
simulator itself (`fit_to_memory`). When no device has room the placer still
places (on the device with the most room), records
``meta["memory_estimate_exceeded"]``, and the simulator gives the verdict
(``oom``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placer.cluster import Cluster
from placer.cost_model import op_time_matrix
from placer.graph import OpGraph
from placer.placement import Placement
from placer.simulator.core import graph_arrays
from placer.simulator.transfer import LinkBook
from placer.topology import Routes


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
    routes : every ordered device pair's route (`placer.cluster.Cluster.routes`);
        `bandwidth` and `latency` are each route's bottleneck and summed latency.
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
    routes: Routes

    @classmethod
    def build(cls, graph: OpGraph, cluster: Cluster, fuse_chains: bool = False,
              follow_forward: bool = False) -> "Problem":
        """Compile `graph` on `cluster`.

        `fuse_chains` merges chains into units (`chain_units`); `follow_forward`
        puts each gradient op in its forward op's unit (`forward_units`).
        """
        out_bytes, params, xfer, bandwidth, latency, capacity = graph_arrays(graph, cluster)
        gpus = np.array([i for i, d in enumerate(cluster.devices) if d.kind == "gpu"], dtype=np.int64)
        candidates = gpus if gpus.size else np.arange(len(cluster), dtype=np.int64)
        op_memory = params + out_bytes
        unit = colocation_units(graph)
        smallest = min(cluster.devices[int(d)].memory_bytes for d in candidates)
        if follow_forward:
            unit = forward_units(graph, unit, op_memory, smallest / (2 * len(candidates)))
        if fuse_chains:
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
            capacity=capacity,
            candidates=candidates, routes=cluster.routes(),
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

    @property
    def routed(self) -> bool:
        """Whether the cluster is a topology, whose routes share link directions (not the flat model)."""
        return self.cluster.topology is not None

    def link_book(self) -> LinkBook:
        """A fresh `LinkBook` (every link direction free at 0) over this cluster's routes."""
        return LinkBook(self.routes, self.num_devices)

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

    def placement(self, assignment: np.ndarray, method: str, ledger: "MemoryLedger | LiveMemory | None" = None,
                  **meta) -> Placement:
        """The placement of `assignment`, with what the placer knows in ``meta``."""
        check_colocation(self, assignment)
        if ledger is not None:
            meta["memory_estimate_exceeded"] = ledger.exceeded
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


def _merge_units(graph: OpGraph, unit: np.ndarray, op_memory: np.ndarray, max_memory: float,
                 pairs) -> np.ndarray:
    """Union the units of each op pair in `pairs` unless the result would exceed `max_memory` bytes.

    Returns unit ids renumbered in topological order of each unit's first op.
    """
    parent = list(range(int(unit.max()) + 1))
    memory = np.bincount(unit, weights=op_memory).tolist()

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i, j in pairs:
        a, b = find(int(unit[i])), find(int(unit[j]))
        if a != b and memory[a] + memory[b] <= max_memory:
            parent[max(a, b)] = min(a, b)
            memory[min(a, b)] = memory[a] + memory[b]
    root = [find(u) for u in unit.tolist()]
    renumber: dict[int, int] = {}
    out = np.empty_like(unit)
    for i in graph.topo_order.tolist():
        out[i] = renumber.setdefault(root[i], len(renumber))
    return out


_GRADIENT_SCOPES = ("gradient_tape/", "gradients/")


def forward_units(graph: OpGraph, unit: np.ndarray, op_memory: np.ndarray, max_memory: float) -> np.ndarray:
    """Put each gradient op in the unit of the forward op it differentiates.

    Baechi's forward-operator-based placement (and TensorFlow's
    ``colocate_gradients_with_ops``): only forward ops are really placed and
    each backward op follows its forward op. The forward op is found from the
    name: ``gradient_tape/net/conv1/Conv2D/Conv2DBackpropInput`` belongs to
    ``net/conv1/Conv2D``; failing an exact op, to the first forward op of the
    deepest shared scope of at least two levels (``net/conv1``).
    """
    by_scope: dict[str, int] = {}
    for i in graph.topo_order.tolist():
        name = graph.ops[i].name
        if name.startswith(_GRADIENT_SCOPES):
            continue
        parts = name.split("/")
        for k in range(2, len(parts)):
            by_scope.setdefault("/".join(parts[:k]), i)
    pairs = []
    for j, op in enumerate(graph.ops):
        prefix = next((p for p in _GRADIENT_SCOPES if op.name.startswith(p)), None)
        if prefix is None:
            continue
        parts = op.name[len(prefix):].split("/")
        for k in range(len(parts) - 1, 1, -1):
            scope = "/".join(parts[:k])
            i = graph.index.get(scope, by_scope.get(scope))
            if i is not None:
                pairs.append((i, j))
                break
    return _merge_units(graph, unit, op_memory, max_memory, pairs)


def chain_units(graph: OpGraph, unit: np.ndarray, op_memory: np.ndarray, max_memory: float) -> np.ndarray:
    """Merge units along chains: op i joins op j when j is i's only consumer and i is j's only input.

    Baechi's operator fusion: such a pair gains nothing from two devices (j
    cannot start before i ends) and loses a transfer, so placing them as one
    shrinks the problem and stops greedy schedulers from splitting chains.
    A merge that would make a unit heavier than `max_memory` bytes is
    skipped, so fusion never makes a graph unplaceable. Numbering stays in
    topological order of each unit's first op.
    """
    p_off, p_idx = graph.predecessors
    s_off, _ = graph.successors
    indeg, outdeg = np.diff(p_off), np.diff(s_off)
    pairs = [(int(p_idx[p_off[j]]), j) for j in np.flatnonzero(indeg == 1).tolist()
             if outdeg[p_idx[p_off[j]]] == 1]
    return _merge_units(graph, unit, op_memory, max_memory, pairs)


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
    """Static bytes (weights + every output) on each device as units are placed.

    Parameters
    ----------
    problem : the compiled problem (unit memory and device capacity).
    limit : bytes allowed per device; the device capacity by default
        (m-TOPO passes its balancing share).
    """

    def __init__(self, problem: Problem, limit: np.ndarray | None = None):
        self.problem = problem
        self.limit = problem.capacity.copy() if limit is None else np.asarray(limit, dtype=np.float64)
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



def fit_to_memory(problem: Problem, unit_device: np.ndarray, devices: np.ndarray,
                  max_rounds: int = 30) -> tuple[np.ndarray, "MemoryLedger"]:
    """Move units off devices the simulator finds over memory.

    Partitioning placers (round robin, METIS, stages, m-TOPO) choose devices
    without a schedule; this pass simulates their choice and, for each device
    whose peak exceeds its capacity, moves its last units (in topological
    order, so stages stay nearly contiguous) to the device among `devices`
    with the most headroom, then simulates again. Returns the new device per
    unit and a ledger whose ``exceeded`` says whether some device is still
    over after `max_rounds` rounds (or no move was possible).
    """
    from placer.simulator import Simulator

    unit_device = np.array(unit_device, dtype=np.int64)
    ledger = MemoryLedger(problem)
    sim = Simulator(problem.graph, problem.cluster, times=problem.times)
    capacity = problem.capacity
    for _ in range(max_rounds):
        peak = sim.run(expand_units(problem, unit_device)).peak_memory
        over = peak - capacity
        if (over <= 0).all():
            break
        headroom = capacity - peak
        moved = False
        for d in np.argsort(-over):
            if over[d] <= 0:
                break
            targets = devices[devices != d]
            if not targets.size:
                break
            budget = over[d]
            for u in np.flatnonzero(unit_device == d)[::-1]:
                t = int(targets[np.argmax(headroom[targets])])
                if headroom[t] < problem.unit_memory[u] and headroom[t] < budget:
                    break
                unit_device[u] = t
                headroom[t] -= problem.unit_memory[u]
                budget -= problem.unit_memory[u]
                moved = True
                if budget <= 0:
                    break
        if not moved:
            break
    else:
        peak = sim.run(expand_units(problem, unit_device)).peak_memory
    ledger.used = peak
    ledger.exceeded = bool((peak > capacity).any())
    return unit_device, ledger


class LiveMemory:
    """Bytes alive on each device as a list scheduler places ops, in schedule order.

    A unit's weights are charged when the unit is pinned to a device; an op's
    output is alive from its placement until every consumer of it has been
    scheduled, on its own device and on each device it was sent to. This is
    how Baechi's m-ETF accounts memory (allocate at run, free after the
    successors ran); the simulator's verdict remains the judge.
    """

    def __init__(self, problem: Problem):
        self.problem = problem
        self.limit = problem.capacity.copy()
        self.used = np.zeros(problem.num_devices)
        self.peak = np.zeros(problem.num_devices)
        self.exceeded = False
        self.unit_params = np.bincount(
            problem.unit, weights=np.array([op.param_bytes for op in problem.graph.ops]), minlength=problem.num_units)
        s_off, _ = problem.graph.successors
        self.waiting = np.diff(s_off).tolist()  # consumers of each op not scheduled yet
        self.copies: dict[int, list[int]] = {}  # op -> devices holding a copy of its output
        self.p_off, self.p_idx = problem.graph.predecessors

    def need(self, i: int, u: int, pinned: bool) -> float:
        """Bytes op `i` (of unit `u`) would add on a device: its output, plus its unit's weights if the unit
        is not `pinned` yet."""
        return float(self.problem.out_bytes[i]) + (0.0 if pinned else float(self.unit_params[u]))

    def room(self) -> np.ndarray:
        return self.limit - self.used

    def place(self, i: int, d: int, new_unit: int | None, assignment: np.ndarray) -> None:
        """Account op `i` placed on `d` (`new_unit`: the unit it pins there, if it is the first)."""
        out = self.problem.out_bytes
        if new_unit is not None:
            self.used[d] += self.unit_params[new_unit]
        self.used[d] += out[i]
        self.copies[i] = [d]
        for m in self.p_idx[self.p_off[i]:self.p_off[i + 1]].tolist():
            held = self.copies.get(m)
            if held is not None and d not in held:
                held.append(d)
                self.used[d] += out[m]
        np.maximum(self.peak, self.used, out=self.peak)
        if self.used[d] > self.limit[d]:
            self.exceeded = True
        for m in self.p_idx[self.p_off[i]:self.p_off[i + 1]].tolist():
            self.waiting[m] -= 1
            if self.waiting[m] == 0:
                self._free(m)
        if self.waiting[i] == 0:
            self._free(i)

    def _free(self, m: int) -> None:
        for d in self.copies.pop(m, ()):
            self.used[d] -= self.problem.out_bytes[m]
