"""Measure a cluster's links: time copies between every device pair, and pairs of copies at once.

A copy between devices a and b is timed as the simulator charges it: as
what it adds to a step. One step runs a chain of K + 1 ``Neg`` ops on a
tensor, alternating between a and b (K crossings, both ways) or all on a
(none); the difference of the two steps' medians over interleaved rounds,
divided by K, is one crossing's cost, the executor's hand-over included.
A chain runs one op at a time, as a step's dependent ops do; K independent
copies at once instead measured the cache misses of a consumer on the other
core (a 1 MiB crossing cost 200-280 us here, against 49 us for 4 MiB in a
chain). Both directions of a pair get the chain's figure.

Two transfers timed together and alone say whether they share a port: with
``extra`` the seconds a set of copies adds to the step, ``sharing = (extra(both)
- max(alone)) / min(alone)`` is about 0 for independent paths and about 1 for
one serialised resource. Pairs tried: each pair both ways at once (is the link
full duplex?), two copies out of one device and two into one, and, on a
topology, disjoint pairs whose modelled routes share a link direction.

The device names are the cluster's, so the same code times logical CPUs here
and GPUs where TensorFlow has them. `TFProber` runs the steps; tests give a
fake one.
"""

from __future__ import annotations

import copy
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

from placer.cluster import Cluster, Link
from placer.errors import PlacerError
from placer.topology import TopoLink, Topology

Transfer = tuple[str, str]
SMALL_BYTES = 256
LARGE_BYTES = 1 << 22
SHARED = 0.5
"""`sharing` above which two transfers are reported as sharing a resource."""


class Prober(Protocol):
    def extra_seconds(self, transfers: Sequence[Transfer], nbytes: int) -> float:
        """Seconds one copy of `nbytes` along each of `transfers` (all at once) adds to a step."""


class TFProber:
    """Times copies in TensorFlow on the cluster's devices (logical CPUs: ``/device:CPU:k`` makes k + 1).

    Parameters
    ----------
    copies : K, the crossings of one transfer's chain in one step.
    rounds, per_round : interleaved rounds of the step with and without crossings, steps timed per round.
    """

    def __init__(self, copies: int = 40, rounds: int = 8, per_round: int = 3):
        if min(copies, rounds, per_round) < 1:
            raise PlacerError(f"need copies, rounds and steps per round >= 1, got {copies}, {rounds}, {per_round}")
        self.copies, self.rounds, self.per_round = copies, rounds, per_round

    def _step(self, transfers: Sequence[Transfer], nbytes: int, cross: bool):
        import numpy as np
        import tensorflow as tf

        from placer.measure.runner import session_config

        cpus = 1 + max((int(d.rpartition(":")[2]) for t in transfers for d in t if "/device:CPU:" in d), default=0)
        graph = tf.Graph()
        fetches = []
        with graph.as_default():
            for a, b in transfers:
                with tf.device(a):
                    t = tf.Variable(np.ones(max(nbytes // 4, 1), dtype=np.float32)).read_value()
                for k in range(self.copies + 1):
                    with tf.device(b if cross and k % 2 else a):
                        t = tf.math.negative(t)
                fetches.append(t)
            step = tf.group(*fetches)
            init = tf.compat.v1.global_variables_initializer()
        session = tf.compat.v1.Session(graph=graph, config=session_config(cpus))
        session.run(init)
        return session, step

    def extra_seconds(self, transfers: Sequence[Transfer], nbytes: int) -> float:
        runs = [self._step(transfers, nbytes, cross) for cross in (True, False)]
        times: list[list[float]] = [[], []]
        try:
            for s, step in runs:
                s.run(step)
            for _ in range(self.rounds):
                for k, (s, step) in enumerate(runs):
                    for _ in range(self.per_round):
                        t0 = time.perf_counter()
                        s.run(step)
                        times[k].append(time.perf_counter() - t0)
        finally:
            for s, _ in runs:
                s.close()
        return (statistics.median(times[0]) - statistics.median(times[1])) / self.copies


@dataclass
class PairFit:
    """One device pair's measured copy: seconds per copy at both sizes, and the latency and bandwidth they give."""

    src: str
    dst: str
    small_seconds: float
    large_seconds: float
    latency: float
    bandwidth: float | None  # None: no per-byte cost above the noise

    def to_dict(self) -> dict[str, Any]:
        return {"from": self.src, "to": self.dst, "small_seconds": self.small_seconds,
                "large_seconds": self.large_seconds, "latency": self.latency, "bandwidth": self.bandwidth}


def fit_pair(src: str, dst: str, small: float, large: float, small_bytes: int, large_bytes: int) -> PairFit:
    latency = max(small, 0.0)
    extra = large - small
    return PairFit(src, dst, small, large, latency, (large_bytes - small_bytes) / extra if extra > 0 else None)


def concurrent_sets(cluster: Cluster, limit: int) -> list[tuple[Transfer, Transfer]]:
    """Pairs of transfers to time together (see the module docstring), at most `limit`, in a fixed order."""
    names = cluster.device_names
    sets: list[tuple[Transfer, Transfer]] = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            sets.append(((a, b), (b, a)))
    for a in names:
        others = [d for d in names if d != a]
        for b, c in zip(others, others[1:]):
            sets.append(((a, b), (a, c)))
            sets.append(((b, a), (c, a)))
    if cluster.topology is not None:
        pairs = [(a, b) for a in names for b in names if a != b]
        uses = {p: set(cluster.compiled.directions(*p)) for p in pairs}
        for k, p in enumerate(pairs):
            for q in pairs[k + 1:]:
                if not set(p) & set(q) and uses[p] & uses[q]:
                    sets.append((p, q))
    return list(dict.fromkeys(sets))[:limit]


def calibrate(cluster: Cluster, prober: Prober, *, small_bytes: int = SMALL_BYTES, large_bytes: int = LARGE_BYTES,
              max_concurrent: int = 16, progress: Callable[[str], None] | None = None) -> Cluster:
    """`cluster` with measured link bandwidths and latencies, the raw measurements in ``meta["calibration"]``.

    A flat cluster gets a link per device pair (both directions timed; the
    slower one kept) and the median of them as its default link. A topology
    keeps its shape: each link's bandwidth (latency) is scaled by the median
    over the pairs routed through it of measured / modelled route bandwidth
    (latency).

    Raises
    ------
    PlacerError
        If the cluster has fewer than two devices.
    """
    say = progress or (lambda text: None)
    names = cluster.device_names
    if len(names) < 2:
        raise PlacerError(f"cluster {cluster.name!r} has one device: there is no link to calibrate")
    pairs = [(a, b) for a in names for b in names if a != b]
    fits: dict[Transfer, PairFit] = {}
    for k, (a, b) in enumerate(pairs):
        small = prober.extra_seconds([(a, b)], small_bytes)
        large = prober.extra_seconds([(a, b)], large_bytes)
        fits[(a, b)] = fit_pair(a, b, small, large, small_bytes, large_bytes)
        say(f"copy {k + 1}/{len(pairs)} {a} -> {b}: {1e6 * small:.1f} us ({small_bytes} B), "
            f"{1e6 * large:.1f} us ({large_bytes} B)")
    concurrent = []
    sets = concurrent_sets(cluster, max_concurrent)
    for k, (p, q) in enumerate(sets):
        both = prober.extra_seconds([p, q], large_bytes)
        alone = [fits[p].large_seconds, fits[q].large_seconds]
        lo, hi = min(alone), max(alone)
        sharing = min(max((both - hi) / lo, 0.0), 1.0) if lo > 0 else None
        concurrent.append({"transfers": [list(p), list(q)], "together_seconds": both, "alone_seconds": alone,
                           "sharing": sharing, "shared": sharing is not None and sharing > SHARED})
        say(f"together {k + 1}/{len(sets)} {p[0]} -> {p[1]} with {q[0]} -> {q[1]}: sharing "
            + ("n/a" if sharing is None else f"{sharing:.2f}"))
    out = _with_fits(cluster, fits)
    out.meta = copy.deepcopy(cluster.meta)
    out.meta["calibration"] = {"small_bytes": small_bytes, "large_bytes": large_bytes,
                               "pairs": [f.to_dict() for f in fits.values()], "concurrent": concurrent}
    return out


def _with_fits(cluster: Cluster, fits: dict[Transfer, PairFit]) -> Cluster:
    if cluster.topology is None:
        links = {}
        for (a, b), f in fits.items():
            if a < b:
                g = fits[(b, a)]
                bws = [x.bandwidth for x in (f, g) if x.bandwidth is not None]
                old = cluster.link(a, b)
                links[frozenset((a, b))] = Link(min(bws) if bws else old.bandwidth, max(f.latency, g.latency))
        default = Link(statistics.median(l.bandwidth for l in links.values()),
                       statistics.median(l.latency for l in links.values()))
        return Cluster(cluster.name, cluster.devices, links, default_link=default, meta={},
                       shared_threads=cluster.shared_threads)
    bw_ratio: dict[int, list[float]] = {}
    lat_ratio: dict[int, list[float]] = {}
    model_bw, model_lat = cluster.link_matrices()
    index = {d: i for i, d in enumerate(cluster.device_names)}
    for (a, b), f in fits.items():
        i, j = index[a], index[b]
        for r in cluster.compiled.directions(a, b):
            if f.bandwidth is not None:
                bw_ratio.setdefault(r // 2, []).append(f.bandwidth / model_bw[i, j])
            if model_lat[i, j] > 0:
                lat_ratio.setdefault(r // 2, []).append(f.latency / model_lat[i, j])
    links = []
    for k, l in enumerate(cluster.topology.links):
        bw = l.bandwidth * statistics.median(bw_ratio[k]) if k in bw_ratio else l.bandwidth
        lat = l.latency * statistics.median(lat_ratio[k]) if k in lat_ratio else l.latency
        links.append(TopoLink(l.a, l.b, bw, lat, l.kind))
    topology = Topology(cluster.topology.switches, links, cluster.topology.routes)
    return Cluster(cluster.name, cluster.devices, topology=topology, meta={}, shared_threads=cluster.shared_threads)
