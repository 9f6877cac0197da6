"""`Simulator`: a graph and a cluster compiled to arrays, scoring placements fast.

Build one `Simulator` per (graph, cluster) and call `run` or `run_batch` as
often as needed: compiling (cost matrix, CSR adjacency, lower bound) happens
once, and each call is a single pass of the numba event loop in `kernel.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import NamedTuple

import numpy as np

from placer.cluster import Cluster
from placer.cost_model import op_time_matrix, resident_bytes
from placer.dag import critical_path_length
from placer.errors import PlacementError, PlacerError
from placer.graph import OpGraph
from placer.placement import Placement
from placer.simulator import kernel


class GraphArrays(NamedTuple):
    """What ops move and hold, and what links and devices allow, as float64 arrays.

    The simulator and the throughput model (`placer.objectives`) both read these.
    """

    out_bytes: np.ndarray  # [num_ops] bytes of each op's output
    params: np.ndarray  # [num_ops] bytes of weights each op holds
    xfer_time: np.ndarray  # [num_ops] profiled seconds to send the output, -1 where the link model applies
    bandwidth: np.ndarray  # [D, D] bytes/s between devices, a route's bottleneck (inf on the diagonal)
    latency: np.ndarray  # [D, D] seconds per transfer, a route's summed latency (0 on the diagonal)
    memory_bytes: np.ndarray  # [D] capacity of each device


def graph_arrays(graph: OpGraph, cluster: Cluster) -> GraphArrays:
    """Compile the per-op sizes of `graph` and the links and capacities of `cluster`."""
    bandwidth, latency = cluster.link_matrices()
    return GraphArrays(
        out_bytes=np.array([op.output_bytes for op in graph.ops], dtype=np.float64),
        params=np.array([op.param_bytes for op in graph.ops], dtype=np.float64),
        xfer_time=np.array([-1.0 if op.transfer_time is None else op.transfer_time for op in graph.ops],
                           dtype=np.float64),
        bandwidth=bandwidth, latency=latency,
        memory_bytes=np.array([d.memory_bytes for d in cluster.devices], dtype=np.float64),
    )


def check_assignment(assignment: np.ndarray, graph: OpGraph, cluster: Cluster) -> np.ndarray:
    """`assignment` (a device index per op, graph order; or ``[K, num_ops]``) as contiguous int64.

    Raises
    ------
    PlacementError
        If it does not have one entry per op, or names a device the cluster lacks.
    """
    a = np.ascontiguousarray(assignment, dtype=np.int64)
    if a.shape[-1] != len(graph):
        raise PlacementError(f"assignment has {a.shape[-1]} entries; graph {graph.name!r} has {len(graph)} ops")
    D = len(cluster)
    if a.size and (a.min() < 0 or a.max() >= D):
        raise PlacementError(f"assignment names device {int(a.max() if a.max() >= D else a.min())}; "
                             f"cluster {cluster.name!r} has devices 0..{D - 1}")
    return a


@dataclass
class SimResult:
    """What one simulated step tells.

    Attributes
    ----------
    step_time : seconds from the first op's start to the last op's end.
    busy : seconds each device spent computing.
    peak_memory : peak bytes on each device (weights + live tensors).
    memory_bytes : each device's capacity.
    bytes_moved : bytes sent over links.
    oom : whether any device's peak exceeds its capacity.
    lower_bound : no placement of this graph on this cluster can be faster.
    start, finish : seconds, per op (graph order).
    send_op, send_dev, send_start, send_end : one entry per transfer (op i's output sent to
        device j, from and to which seconds), in the order they were asked for.
    held : [num_ops, num_devices] bytes op i's output holds on device j when produced there
        (`placer.cost_model.resident_bytes`); None: its output bytes.
    transfer_start, transfer_end : the transfers as [num_ops, num_devices] tables, -1 where op i
        sends nothing to device j; built on first use (at 100k ops and 16 devices each is 12 MiB,
        more time to fill than the step took to simulate).
    """

    step_time: float
    busy: np.ndarray
    peak_memory: np.ndarray
    memory_bytes: np.ndarray
    bytes_moved: float
    oom: bool
    lower_bound: float
    start: np.ndarray
    finish: np.ndarray
    send_op: np.ndarray = field(repr=False)
    send_dev: np.ndarray = field(repr=False)
    send_start: np.ndarray = field(repr=False)
    send_end: np.ndarray = field(repr=False)
    held: np.ndarray | None = None

    def _table(self, values: np.ndarray) -> np.ndarray:
        table = np.full((len(self.start), len(self.busy)), -1.0)
        table[self.send_op, self.send_dev] = values
        return table

    @cached_property
    def transfer_start(self) -> np.ndarray:
        return self._table(self.send_start)

    @cached_property
    def transfer_end(self) -> np.ndarray:
        return self._table(self.send_end)


@dataclass
class BatchResult:
    """Summaries of K simulated placements (row k belongs to placement k)."""

    step_time: np.ndarray  # [K]
    busy: np.ndarray  # [K, D]
    peak_memory: np.ndarray  # [K, D]
    bytes_moved: np.ndarray  # [K]
    oom: np.ndarray  # [K] bool


class Simulator:
    """Scores placements of one graph on one cluster.

    Parameters
    ----------
    graph : the graph.
    cluster : the cluster.
    times : optional ``[num_ops, num_devices]`` compute seconds; by default
        from `placer.cost_model.op_time_matrix`.

    Examples
    --------
    >>> from placer import presets
    >>> from placer.graph import Op, OpGraph
    >>> g = OpGraph("chain", [Op("a", "X", cost={"gpu": 1.0}), Op("b", "X", ["a"], cost={"gpu": 2.0})])
    >>> sim = Simulator(g, presets.get("2gpu"))
    >>> sim.run(np.array([1, 1])).step_time
    3.0
    """

    def __init__(self, graph: OpGraph, cluster: Cluster, times: np.ndarray | None = None):
        self.graph = graph
        self.cluster = cluster
        self.times = np.ascontiguousarray(op_time_matrix(graph, cluster) if times is None else times, dtype=np.float64)
        self.rank = graph.topo_rank
        self.p_off, self.p_idx = graph.predecessors
        self.s_off, self.s_idx = graph.successors
        (self.out_bytes, self.params, self.xfer_time, self.bandwidth, self.latency,
         self.memory_bytes) = graph_arrays(graph, cluster)
        self.held = resident_bytes(graph, cluster)  # [n, D] bytes an output holds where it is produced
        self.routes = cluster.routes()  # the link directions each pair's transfers use (and share)
        self._ranked = self._rank_space()
        # a shared thread pool (logical CPUs of one process) lets a device run several ops at once,
        # but never more than the pool's threads in the whole cluster
        threads = cluster.shared_threads
        # more threads than ops change nothing; the kernel sizes its event heap by them (2**40 threads
        # asked for terabytes, 10**30 overflowed int64)
        slots = min(threads, len(graph)) if threads else 1
        self.slots = np.full(len(cluster), slots, dtype=np.int64)
        self.pool = slots if threads else 0
        self._check_finite()
        fastest = self.times.min(axis=1)
        self.lower_bound = max(
            critical_path_length(graph, fastest),
            float(fastest.sum()) / (threads or len(cluster)),
        )

    def _check_finite(self) -> None:
        """Refuse a graph and cluster whose step could take longer than a float holds.

        Every op on its slowest device, one after another, and every output sent to every other device
        over the slowest link bound any step; if that bound overflows (op costs near the float's limit,
        a link of 1e-300 bytes/s), the simulated step time could be ``Infinity``, which the service
        answered as ``null`` and a placement file cannot hold as JSON.
        """
        D = self.num_devices
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            worst = self.times.max(axis=1).sum()
            if D > 1:
                off = ~np.eye(D, dtype=bool)
                sends = np.where(self.xfer_time >= 0, self.xfer_time,
                                 self.out_bytes / self.bandwidth[off].min() + self.latency[off].max())
                worst += (D - 1) * sends.sum()
        if not np.isfinite(worst):
            raise PlacerError(f"graph {self.graph.name!r} on cluster {self.cluster.name!r}: a step could take "
                              "longer than a float holds (op costs, sizes or link speeds too extreme to simulate)")

    def _rank_space(self) -> tuple:
        """The kernel's per-op inputs with ops numbered by topological rank (`kernel.simulate_one`):
        ``(order, times, p_off, p_idx, s_off, s_idx, out_bytes, held, xfer_time)``.

        Each op's producers and consumers keep their order (it decides the order of frees and of
        transfers on a link). A graph already in topological order, as importers write them, shares
        the arrays above.
        """
        order = np.ascontiguousarray(self.graph.topo_order, dtype=np.int64)
        per_op = (self.times, self.out_bytes, self.held, self.xfer_time)
        if np.array_equal(order, np.arange(len(order))):
            return (order, self.times, self.p_off, self.p_idx, self.s_off, self.s_idx, *per_op[1:])

        def csr(off, idx):
            deg = np.diff(off)[order]
            new_off = np.zeros(len(order) + 1, dtype=np.int64)
            np.cumsum(deg, out=new_off[1:])
            at = np.repeat(off[:-1][order] - new_off[:-1], deg) + np.arange(new_off[-1])
            return new_off, np.ascontiguousarray(self.rank[idx[at]], dtype=np.int64)

        times, out_bytes, held, xfer_time = (np.ascontiguousarray(a[order]) for a in per_op)
        return (order, times, *csr(self.p_off, self.p_idx), *csr(self.s_off, self.s_idx), out_bytes, held, xfer_time)

    @property
    def num_devices(self) -> int:
        return len(self.cluster)

    def run(self, assignment: np.ndarray) -> SimResult:
        """Simulate one placement given as a device index per op (graph order)."""
        place = check_assignment(assignment, self.graph, self.cluster)
        n, D = len(self.graph), self.num_devices
        dev_params = np.bincount(place, weights=self.params, minlength=D).astype(np.float64)
        start, finish = np.empty(n), np.empty(n)
        step, busy, peak, moved, send_op, send_dev, send_start, send_end = kernel.simulate_one(
            place, *self._ranked, self.bandwidth, self.latency, dev_params, start, finish, self.slots, self.pool,
            *self.routes,
        )
        return SimResult(
            step_time=float(step), busy=busy, peak_memory=peak, memory_bytes=self.memory_bytes,
            bytes_moved=float(moved), oom=bool((peak > self.memory_bytes).any()),
            lower_bound=self.lower_bound, start=start, finish=finish, send_op=send_op, send_dev=send_dev,
            send_start=send_start, send_end=send_end, held=self.held,
        )

    def run_batch(self, assignments: np.ndarray, cutoff: float = np.inf) -> BatchResult:
        """Simulate K placements at once (``[K, num_ops]``); the reward loop of training.

        With a finite `cutoff` (seconds), a placement whose step is sure to take longer is not simulated to
        its end: its step time comes back ``inf`` and its other summaries cover only the ops it started.
        Choosing the fastest of many placements then costs less, and chooses the same one, as long as the
        cutoff is the step time of one of them that fits in memory.
        """
        places = check_assignment(np.atleast_2d(assignments), self.graph, self.cluster)
        steps, busy, peaks, moved = kernel.simulate_batch(
            places, *self._ranked, self.bandwidth, self.latency, self.params, self.slots, self.pool, *self.routes,
            float(cutoff),
        )
        return BatchResult(steps, busy, peaks, moved, (peaks > self.memory_bytes[None, :]).any(axis=1))

    def evaluate(self, placement: Placement) -> Placement:
        """A new placement: `placement` with this graph's and cluster's names and its simulated step time,
        peak memory, oom and lower bound (`placement` itself is left as it was)."""
        res = self.run(placement.assignment(self.graph, self.cluster))
        return replace(
            placement, graph=self.graph.name, cluster=self.cluster.name, devices=dict(placement.devices),
            step_time=res.step_time,
            peak_memory={d.name: float(p) for d, p in zip(self.cluster.devices, res.peak_memory)},
            oom=res.oom, lower_bound=res.lower_bound, meta=dict(placement.meta),
        )


def evaluate(graph: OpGraph, cluster: Cluster, placement: Placement) -> Placement:
    """One-shot `Simulator(graph, cluster).evaluate(placement)`: a new, simulated placement."""
    return Simulator(graph, cluster).evaluate(placement)
