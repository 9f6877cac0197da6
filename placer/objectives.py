"""What a placement is judged by: one step's time, or pipelined throughput.

- ``step_time`` (the default): seconds of one training step, as the
  simulator (`placer.simulator`) computes it.
- ``throughput``: micro-batches stream through the devices (GPipe, PipeDream),
  so a new one can start every *max load* seconds, the load of the busiest
  device. We use the model of Tarnawski et al. (NeurIPS 2020), which their
  published optima are computed with:

  * a device's load = the compute time of its ops + its communication;
  * an op whose output goes to other devices charges its transfer time once
    to its own device (the send) and once to each distinct other device its
    consumers are on (the receive);
  * CPU devices pay no communication (in that model transfers go through host
    memory); in a cluster made only of CPUs every device pays;
  * the objective is the largest load; accelerators must hold their ops'
    ``param_bytes`` and ops of one colocation key share a device.

  An op's transfer time is its ``transfer_time`` when given (profiled
  datasets); otherwise latency + output_bytes / bandwidth of the link used,
  and the send is charged the slowest of its links. On a topology the link
  used is the route (summed latency, bottleneck bandwidth), and the link
  directions are loads too: each transfer charges every direction on its
  route that direction's own latency + bytes / bandwidth (as the simulator
  holds it), and the objective is the largest load of a device or a
  direction. A switch's uplink or a socket link carries the transfers of
  many device pairs and no device's send or receive charge stands for it;
  a device's own port is covered by its charges, but counting it as well
  costs nothing. A flat cluster has no such shared links, and its loads are
  the model's as published.

`ThroughputModel` compiles a graph and cluster once and scores placements,
singly (`loads`) or in batches (`max_load_batch`, for training loops and
local search).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numba
import numpy as np

from placer.cluster import Cluster
from placer.cost_model import op_time_matrix
from placer.errors import PlacerError
from placer.graph import OpGraph
from placer.simulator.core import check_assignment, graph_arrays
from placer.simulator.transfer import link_time, transfer_time

OBJECTIVES = ("step_time", "throughput")


def check_objective(name: str) -> str:
    """`name` if it is an objective, else a PlacerError listing them."""
    if name not in OBJECTIVES:
        raise PlacerError(f"unknown objective {name!r}; objectives: {', '.join(OBJECTIVES)}")
    return name


@dataclass
class Loads:
    """Per-device loads of one placement under the throughput model.

    Attributes
    ----------
    max_load : the objective: the largest entry of `load` (inf if an op is on
        a device it cannot run on).
    load : compute + communication, per device.
    compute : seconds of compute, per device.
    communication : seconds of sends and receives charged, per device.
    held_bytes : ``param_bytes`` held, per device.
    memory_ok : every device holds at most its ``memory_bytes``.
    colocation_ok : every colocation key is on one device.
    link_load : seconds of transfers each link direction carries (topology;
        empty on a flat cluster, whose links are not loads of their own).
    """

    max_load: float
    load: np.ndarray
    compute: np.ndarray
    communication: np.ndarray
    held_bytes: np.ndarray
    memory_ok: bool
    colocation_ok: bool
    link_load: np.ndarray

    @property
    def feasible(self) -> bool:
        return self.memory_ok and self.colocation_ok and bool(np.isfinite(self.max_load))


class ThroughputModel:
    """Scores placements of one graph on one cluster by their max load.

    Parameters
    ----------
    graph, cluster : what is placed where.
    times : optional ``[num_ops, num_devices]`` compute seconds; by default
        `placer.cost_model.op_time_matrix`. Ops the graph lists in
        ``meta["cpu_only_ops"]`` get infinite time on non-CPU devices.

    Examples
    --------
    >>> from placer.graph import Op, OpGraph
    >>> from placer.cluster import Cluster, Device, Link
    >>> dev = dict(peak_flops=1.0, memory_bandwidth=1.0, memory_bytes=1.0)
    >>> c = Cluster("c", [Device("a", "gpu", **dev), Device("b", "gpu", **dev)], default_link=Link(1.0, 0.0))
    >>> g = OpGraph("g", [Op("x", "X", cost={"gpu": 2.0}, transfer_time=0.5),
    ...                   Op("y", "X", ["x"], cost={"gpu": 3.0})])
    >>> ThroughputModel(g, c).loads(np.array([0, 1])).load.tolist()
    [2.5, 3.5]
    """

    def __init__(self, graph: OpGraph, cluster: Cluster, times: np.ndarray | None = None):
        self.graph = graph
        self.cluster = cluster
        t = op_time_matrix(graph, cluster) if times is None else np.array(times, dtype=np.float64)
        kinds = np.array([d.kind for d in cluster.devices])
        cpu_only = graph.meta.get("cpu_only_ops") or []
        if cpu_only:
            rows = [graph.index[n] for n in cpu_only if n in graph.index]
            t[np.ix_(rows, np.flatnonzero(kinds != "cpu"))] = np.inf
        self.times = np.ascontiguousarray(t)
        all_cpu = bool((kinds == "cpu").all())
        self.pays = np.ascontiguousarray((kinds != "cpu") | all_cpu)
        self.s_off, self.s_idx = graph.successors
        (self.out_bytes, self.params, self.xfer_time, self.bandwidth, self.latency,
         self.memory_bytes) = graph_arrays(graph, cluster)
        self.routes = cluster.routes()
        self.routed = cluster.topology is not None
        groups = graph.colocation_groups()
        self.coloc = [np.asarray(ix, dtype=np.int64) for ix in groups.values() if len(ix) > 1]

    @property
    def num_devices(self) -> int:
        return len(self.cluster)

    def loads(self, assignment: np.ndarray) -> Loads:
        """Loads of one placement (a device index per op, graph order)."""
        a = check_assignment(assignment, self.graph, self.cluster)
        compute = np.zeros(self.num_devices)
        comm = np.zeros(self.num_devices)
        links = np.zeros(len(self.routes.bandwidth) if self.routed else 0)
        _loads(a, self.times, self.s_off, self.s_idx, self.xfer_time, self.out_bytes,
               self.bandwidth, self.latency, self.pays, compute, comm, *self.routes, links)
        load = compute + comm
        held = np.bincount(a, weights=self.params, minlength=self.num_devices).astype(np.float64)
        return Loads(
            max_load=max(float(load.max()), float(links.max()) if links.size else 0.0), load=load,
            compute=compute, communication=comm, held_bytes=held,
            memory_ok=bool((held <= self.memory_bytes).all()),
            colocation_ok=all(bool((a[ix] == a[ix[0]]).all()) for ix in self.coloc),
            link_load=links,
        )

    def lower_bound(self) -> float:
        """No placement has a smaller max load: the larger of the heaviest colocation
        group on its fastest device and the total fastest compute spread evenly
        (communication and memory ignored)."""
        fastest = self.times.min(axis=1)
        heaviest = float(fastest.max()) if len(fastest) else 0.0
        for ix in self.coloc:
            heaviest = max(heaviest, float(self.times[ix].sum(axis=0).min()))
        return max(heaviest, float(fastest.sum()) / self.num_devices)

    def max_load(self, assignment: np.ndarray) -> float:
        """The objective of one placement."""
        return self.loads(assignment).max_load

    def load_batch(self, assignments: np.ndarray) -> np.ndarray:
        """Per-device loads of K placements (``[K, num_ops]`` -> ``[K, num_devices]``)."""
        return self._batch(assignments)[0]

    def max_load_batch(self, assignments: np.ndarray) -> np.ndarray:
        """Objective of K placements (``[K, num_ops]`` -> ``[K]``): devices' and link directions' loads."""
        out, link_max = self._batch(assignments)
        return np.maximum(out.max(axis=1), link_max)

    def _batch(self, assignments: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        a = check_assignment(np.atleast_2d(assignments), self.graph, self.cluster)
        out = np.empty((a.shape[0], self.num_devices))
        link_max = np.zeros(a.shape[0])
        _load_batch(a, self.times, self.s_off, self.s_idx, self.xfer_time, self.out_bytes,
                    self.bandwidth, self.latency, self.pays, out, *self.routes,
                    len(self.routes.bandwidth) if self.routed else 0, link_max)
        return out, link_max


@numba.njit(cache=True)
def _loads(a, times, s_off, s_idx, xfer_time, out_bytes, bandwidth, latency, pays, compute, comm,
           route_off, route_res, res_bw, res_lat, links):
    """Fill per-device compute and communication, and each link direction's load in `links` when it has
    room for them (a topology; see the module docstring)."""
    n = a.shape[0]
    D = compute.shape[0]
    seen = np.full(D, -1, dtype=np.int64)
    for u in range(n):
        du = a[u]
        compute[du] += times[u, du]
        send = 0.0
        sends = False
        for k in range(s_off[u], s_off[u + 1]):
            dv = a[s_idx[k]]
            if dv == du or seen[dv] == u:
                continue
            seen[dv] = u
            c = transfer_time(xfer_time, out_bytes, u, latency, bandwidth, du, dv)
            if links.shape[0] > 0:
                for k2 in range(route_off[du * D + dv], route_off[du * D + dv + 1]):
                    r = route_res[k2]
                    if xfer_time[u] >= 0.0:
                        links[r] += xfer_time[u]
                    else:
                        links[r] += link_time(res_lat[r], out_bytes[u], res_bw[r])
            sends = True
            if c > send:
                send = c
            if pays[dv]:
                comm[dv] += c
        if sends and pays[du]:
            comm[du] += send


@numba.njit(cache=True)
def _load_batch(a, times, s_off, s_idx, xfer_time, out_bytes, bandwidth, latency, pays, out,
                route_off, route_res, res_bw, res_lat, num_links, link_max):
    D = times.shape[1]
    compute = np.empty(D)
    comm = np.empty(D)
    links = np.empty(num_links)
    for k in range(a.shape[0]):
        compute[:] = 0.0
        comm[:] = 0.0
        links[:] = 0.0
        _loads(a[k], times, s_off, s_idx, xfer_time, out_bytes, bandwidth, latency, pays, compute, comm,
               route_off, route_res, res_bw, res_lat, links)
        for d in range(D):
            out[k, d] = compute[d] + comm[d]
        for r in range(num_links):
            if links[r] > link_max[k]:
                link_max[k] = links[r]


def max_load(graph: OpGraph, cluster: Cluster, placement) -> float:
    """One-shot throughput objective of a `Placement`."""
    model = ThroughputModel(graph, cluster)
    return model.max_load(placement.assignment(graph, cluster))


def evaluate(graph: OpGraph, cluster: Cluster, placement, objective: str = "step_time"):
    """A new placement: `placement` with its simulated fields, `objective` and, for ``throughput``, its
    ``max_load`` (`placement` itself is left as it was).

    ``step_time`` always stays the simulator's; the objective decides which
    number the placer was asked to make small.
    """
    from placer.simulator import Simulator

    check_objective(objective)
    simulated = Simulator(graph, cluster).evaluate(placement)
    load = max_load(graph, cluster, simulated) if objective == "throughput" else placement.max_load
    return replace(simulated, objective=objective, max_load=load)
