"""Interconnect topology: devices and switches joined by links, and a route per device pair.

A cluster either gives every pair of devices its own independent link (the
flat ``links`` / ``default_link`` spec, the idealised model) or a `Topology`:
switches (PCIe switches, CPU sockets / root complexes, NVSwitch, NICs,
network switches) and links between devices and switches, as the machine is
built. Each direction of a link is one shared resource with a bandwidth
(bytes/s) and a latency (s). A transfer from device a to device b follows the
route from a to b and uses every link direction on it.

Routes pass through switches only, never through another device (a GPU does
not forward traffic). Unless the spec gives a pair's route, it is computed
once per cluster by this rule, which is deterministic:

1. fewest hops (links);
2. among those, the highest bottleneck bandwidth (the route's slowest link);
3. then the lowest total latency;
4. then the lexicographically smallest sequence of node names.

Fewest hops first because that is how PCIe trees (a unique path), NVSwitch
(one switch between any two GPUs) and minimal InfiniBand routing choose.

The sharing model (how transfers that use the same link direction share it)
is the simulator's; `docs/topology.md` states it and why.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, NamedTuple

import numpy as np

from placer.errors import ClusterError

@dataclass(frozen=True, slots=True)
class Switch:
    """A node that forwards traffic and runs no ops.

    Attributes
    ----------
    name : unique among switches and devices, e.g. ``"pcie-switch-0"``.
    kind : what it is, for people and traces: ``"pcie-switch"``, ``"cpu-socket"``,
        ``"nvswitch"``, ``"nic"``, ``"ib-switch"`` (any string).
    """

    name: str
    kind: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind}


@dataclass(frozen=True, slots=True)
class TopoLink:
    """A full-duplex link between two nodes (devices or switches).

    Each direction is a separate resource of `bandwidth` bytes/s and `latency` s.
    `kind` names the technology (``"pcie4-x16"``, ``"nvlink3-x12"``...), for people.
    """

    a: str
    b: str
    bandwidth: float
    latency: float = 0.0
    kind: str = ""

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"between": [self.a, self.b], "bandwidth": self.bandwidth, "latency": self.latency}
        if self.kind:
            d["kind"] = self.kind
        return d


@dataclass(frozen=True, slots=True)
class Route:
    """An explicit route from device `src` to device `dst` through the switches `via`, in order."""

    src: str
    dst: str
    via: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"from": self.src, "to": self.dst, "via": list(self.via)}


class Routes(NamedTuple):
    """Every device pair's route as the simulator reads it: flat arrays of link directions.

    Link direction ``r`` is a resource of ``bandwidth[r]`` bytes/s and
    ``latency[r]`` s; the route from device i to device j (D devices) is
    ``resource[offset[i * D + j]:offset[i * D + j + 1]]``, in order from i
    to j (empty when i == j).
    """

    offset: np.ndarray  # int64[D * D + 1]
    resource: np.ndarray  # int64[total route length]
    bandwidth: np.ndarray  # float64[R]
    latency: np.ndarray  # float64[R]


@dataclass
class Topology:
    """Switches and links joining a cluster's devices, and the routes that override the rule.

    Parameters
    ----------
    switches : the nodes that are not devices.
    links : the links, each between two distinct nodes; one link per pair
        (parallel links are one link with their summed bandwidth).
    routes : explicit routes; every other ordered pair takes the rule's route
        (see the module docstring).
    """

    switches: list[Switch]
    links: list[TopoLink]
    routes: list[Route] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"switches": [s.to_dict() for s in self.switches],
                             "links": [l.to_dict() for l in self.links]}
        if self.routes:
            d["routes"] = [r.to_dict() for r in self.routes]
        return d

    @classmethod
    def from_dict(cls, data: Any, where: str) -> "Topology":
        """Parse the ``topology`` object of a cluster spec (checked against the devices by `compile`)."""
        if not isinstance(data, dict):
            raise ClusterError(f"{where}: 'topology' must be an object with 'switches' and 'links'")
        known_fields(data, ("switches", "links", "routes"), f"{where}: topology")
        raw_sw, raw_links, raw_routes = data.get("switches", []), data.get("links"), data.get("routes", [])
        if not isinstance(raw_sw, list):
            raise ClusterError(f"{where}: topology 'switches' must be a list")
        if not isinstance(raw_links, list) or not raw_links:
            raise ClusterError(f"{where}: topology 'links' must be a non-empty list")
        if not isinstance(raw_routes, list):
            raise ClusterError(f"{where}: topology 'routes' must be a list")
        switches = []
        for k, s in enumerate(raw_sw):
            if not isinstance(s, dict) or not isinstance(s.get("name"), str) or not s["name"]:
                raise ClusterError(f"{where}: switch #{k}: expected an object with a non-empty 'name'")
            known_fields(s, ("name", "kind"), f"{where}: switch {s['name']!r}")
            kind = s.get("kind", "switch")
            if not isinstance(kind, str) or not kind:
                raise ClusterError(f"{where}: switch {s['name']!r}: 'kind' must be a non-empty string")
            switches.append(Switch(s["name"], kind))
        links = []
        for k, l in enumerate(raw_links):
            lw = f"{where}: topology link #{k}"
            between = link_ends(l, lw, "node")
            lw = f"{lw} ({between[0]!r} - {between[1]!r})"
            known_fields(l, ("between", "bandwidth", "latency", "kind"), lw)
            kind = l.get("kind", "")
            if not isinstance(kind, str):
                raise ClusterError(f"{lw}: 'kind' must be a string")
            links.append(TopoLink(between[0], between[1], positive_number(l.get("bandwidth"), "'bandwidth'", lw),
                                  positive_number(l.get("latency", 0.0), "'latency'", lw, allow_zero=True), kind))
        routes = []
        for k, r in enumerate(raw_routes):
            rw = f"{where}: route #{k}"
            if not isinstance(r, dict):
                raise ClusterError(f"{rw}: expected an object with 'from', 'to' and 'via'")
            known_fields(r, ("from", "to", "via"), rw)
            src, dst, via = r.get("from"), r.get("to"), r.get("via", [])
            if not isinstance(src, str) or not isinstance(dst, str):
                raise ClusterError(f"{rw}: 'from' and 'to' must be device names")
            if not isinstance(via, list) or not all(isinstance(x, str) for x in via):
                raise ClusterError(f"{rw}: 'via' must be a list of switch names")
            routes.append(Route(src, dst, tuple(via)))
        return cls(switches, links, routes)

    def compile(self, devices: list[str], where: str) -> "CompiledTopology":
        """Check the topology against the cluster's device names and fix every pair's route.

        Raises
        ------
        ClusterError
            Naming the bad element: an unknown node, a duplicate name or link, a
            device with no link, a device another cannot reach, a bad explicit route.
        """
        return CompiledTopology(self, devices, where)


class CompiledTopology:
    """A checked topology with every ordered device pair's route (node names and link directions).

    Link k of `Topology.links` is directions ``2k`` (a to b) and ``2k + 1`` (b to a).
    """

    def __init__(self, topology: Topology, devices: list[str], where: str):
        self.topology = topology
        self.devices = list(devices)
        dev_set = set(devices)
        kinds: dict[str, str] = {d: "device" for d in devices}
        for s in topology.switches:
            if s.name in dev_set:
                raise ClusterError(f"{where}: switch {s.name!r} has the name of a device; give it another name")
            if s.name in kinds:
                raise ClusterError(f"{where}: duplicate switch name {s.name!r}")
            kinds[s.name] = s.kind
        # adjacency: node -> {neighbour: direction index}
        self.adj: dict[str, dict[str, int]] = {n: {} for n in kinds}
        pairs: dict[frozenset, int] = {}
        for k, l in enumerate(topology.links):
            lw = f"{where}: topology link #{k} ({l.a!r} - {l.b!r})"
            for node in (l.a, l.b):
                if node not in kinds:
                    raise ClusterError(f"{lw}: unknown node {node!r} (not a device or a switch of the cluster)")
            if l.a == l.b:
                raise ClusterError(f"{lw}: joins {l.a!r} to itself")
            pair = frozenset((l.a, l.b))
            if pair in pairs:
                raise ClusterError(f"{lw}: {l.a!r} and {l.b!r} are already joined by topology link #{pairs[pair]}; "
                                   "give each pair one link (parallel links as one, with their summed bandwidth)")
            pairs[pair] = k
            self.adj[l.a][l.b] = 2 * k
            self.adj[l.b][l.a] = 2 * k + 1
        for n, nbrs in self.adj.items():
            if not nbrs:
                what = "device" if n in dev_set else "switch"
                raise ClusterError(f"{where}: {what} {n!r} has no link in the topology")
        self.bandwidth = np.repeat([l.bandwidth for l in topology.links], 2).astype(np.float64)
        self.latency = np.repeat([l.latency for l in topology.links], 2).astype(np.float64)
        self.paths: dict[tuple[str, str], tuple[str, ...]] = {}
        for r in topology.routes:
            self._explicit(r, dev_set, where)
        for src in devices:
            self._rule_routes(src, dev_set, where)
        self._routes = self._build_routes()
        self._matrices = route_matrices(self._routes, len(devices))

    def restricted(self, devices: set[str]) -> Topology:
        """The switches and links the routes among `devices` use, with the explicit routes among them: a
        topology in which those devices route exactly as they do here (the rule picks the same route in a
        part of the network that holds it)."""
        used = {frozenset(hop) for (a, b), path in self.paths.items() if a in devices and b in devices
                for hop in zip(path, path[1:])}
        links = [l for l in self.topology.links if frozenset((l.a, l.b)) in used]
        ends = {n for l in links for n in (l.a, l.b)}
        return Topology([s for s in self.topology.switches if s.name in ends], links,
                        [r for r in self.topology.routes if r.src in devices and r.dst in devices])

    def _explicit(self, r: Route, dev_set: set[str], where: str) -> None:
        rw = f"{where}: route {r.src!r} -> {r.dst!r}"
        for end in (r.src, r.dst):
            if end not in dev_set:
                raise ClusterError(f"{rw}: {end!r} is not a device of the cluster")
        if r.src == r.dst:
            raise ClusterError(f"{rw}: a route joins two different devices")
        if (r.src, r.dst) in self.paths:
            raise ClusterError(f"{rw}: given twice")
        for node in r.via:
            if node not in self.adj:
                raise ClusterError(f"{rw}: unknown node {node!r}")
            if node in dev_set:
                raise ClusterError(f"{rw}: passes through device {node!r}; routes pass through switches only")
        path = (r.src, *r.via, r.dst)
        if len(set(path)) != len(path):
            raise ClusterError(f"{rw}: visits a node twice")
        for a, b in zip(path, path[1:]):
            if b not in self.adj[a]:
                raise ClusterError(f"{rw}: no link between {a!r} and {b!r}")
        self.paths[(r.src, r.dst)] = path

    def _hops(self, src: str, dev_set: set[str], min_bandwidth: float) -> dict[str, int]:
        """Hops from `src` to each node over links of at least `min_bandwidth`, never through another device."""
        dist = {src: 0}
        frontier = [src]
        while frontier:
            nxt = []
            for u in frontier:
                if u != src and u in dev_set:
                    continue
                for v, r in self.adj[u].items():
                    if v not in dist and self.bandwidth[r] >= min_bandwidth:
                        dist[v] = dist[u] + 1
                        nxt.append(v)
            frontier = nxt
        return dist

    def _rule_routes(self, src: str, dev_set: set[str], where: str) -> None:
        """Fewest hops, then widest, then lowest latency, then lexicographic (see the module docstring).

        Exact without listing paths: the fewest hops H(dst) come from a
        breadth-first search; the widest H-hop route's bottleneck is the
        largest bandwidth b whose links alone still reach dst in H hops; among
        H-hop routes over links of at least b, (latency, names) is minimised
        layer by layer, which is exact because both parts of that key keep
        their order when the same suffix is appended.
        """
        hops = self._hops(src, dev_set, 0.0)
        wanted = [d for d in self.devices if d != src and (src, d) not in self.paths]
        for dst in wanted:
            if dst not in hops:
                raise ClusterError(f"{where}: device {src!r} cannot reach device {dst!r} in the topology "
                                   "(routes pass through switches, never through another device)")
        widest: dict[str, float] = {}
        for b in sorted(set(self.bandwidth.tolist()), reverse=True):
            if len(widest) == len(wanted):
                break
            reach = self._hops(src, dev_set, b)
            for dst in wanted:
                if dst not in widest and reach.get(dst) == hops[dst]:
                    widest[dst] = b
        layers = sorted(hops, key=hops.__getitem__)
        for b in sorted(set(widest.values())):
            best: dict[str, tuple[float, tuple[str, ...]]] = {src: (0.0, (src,))}
            for u in layers:
                if u not in best or (u != src and u in dev_set):
                    continue
                lat_u, path_u = best[u]
                for v, r in self.adj[u].items():
                    if hops.get(v) == hops[u] + 1 and self.bandwidth[r] >= b:
                        cand = (lat_u + self.latency[r], path_u + (v,))
                        if v not in best or cand < best[v]:
                            best[v] = cand
            for dst in wanted:
                if widest[dst] == b:
                    self.paths[(src, dst)] = best[dst][1]

    def directions(self, src: str, dst: str) -> list[int]:
        """The link directions of the route from `src` to `dst`, in order."""
        path = self.paths[(src, dst)]
        return [self.adj[a][b] for a, b in zip(path, path[1:])]

    def routes(self) -> Routes:
        """Every ordered device pair's route as flat arrays (device order of the cluster)."""
        return self._routes

    def matrices(self) -> tuple[np.ndarray, np.ndarray]:
        """`route_matrices` of the routes: bottleneck bandwidth and summed latency per pair (copies)."""
        return self._matrices[0].copy(), self._matrices[1].copy()

    def _build_routes(self) -> Routes:
        D = len(self.devices)
        offset = np.zeros(D * D + 1, dtype=np.int64)
        resource: list[int] = []
        for i, a in enumerate(self.devices):
            for j, b in enumerate(self.devices):
                if i != j:
                    resource += self.directions(a, b)
                offset[i * D + j + 1] = len(resource)
        return Routes(offset, np.array(resource, dtype=np.int64), self.bandwidth, self.latency)


def flat_routes(bandwidth: np.ndarray, latency: np.ndarray) -> Routes:
    """The flat model as routes: each ordered pair (i, j) has its own link direction ``i * D + j``.

    A one-hop route's time, latency + bytes / bandwidth, is computed with
    exactly the arithmetic of the flat model, so flat clusters keep their
    step times bit for bit.
    """
    D = bandwidth.shape[0]
    pair = np.arange(D * D, dtype=np.int64)
    off_diagonal = pair // D != pair % D
    offset = np.concatenate([[0], np.cumsum(off_diagonal)]).astype(np.int64)
    return Routes(offset, pair[off_diagonal], np.ascontiguousarray(bandwidth.ravel(), dtype=np.float64),
                  np.ascontiguousarray(latency.ravel(), dtype=np.float64))


def route_matrices(routes: Routes, num_devices: int) -> tuple[np.ndarray, np.ndarray]:
    """``(bandwidth, latency)`` D x D: each route's bottleneck bandwidth and summed latency.

    What one transfer alone on an idle machine sees (the diagonal: inf, 0);
    the heuristics and the RL features read these.
    """
    D = num_devices
    bw = np.full((D, D), np.inf)
    lat = np.zeros((D, D))
    for i in range(D):
        for j in range(D):
            if i != j:
                rs = routes.resource[routes.offset[i * D + j]:routes.offset[i * D + j + 1]]
                b, s = math.inf, 0.0
                for r in rs:  # in route order, as the simulator sums them
                    s += routes.latency[r]
                    b = min(b, routes.bandwidth[r])
                bw[i, j], lat[i, j] = b, s
    return bw, lat


def pairs_per_direction(routes: Routes) -> np.ndarray:
    """int64[R]: how many ordered device pairs' routes use each link direction.

    1 everywhere in a flat cluster (each pair has its own direction); a GPU's
    PCIe port or a switch's uplink in a topology counts every pair routed
    over it, which is how many transfers may queue for it at once.
    """
    return np.bincount(routes.resource, minlength=routes.bandwidth.shape[0]).astype(np.int64)


class RouteFacts(NamedTuple):
    """Each ordered device pair's route described as numbers, ``[D, D]`` each (diagonal: inf, 0, 0, 0).

    ``bandwidth`` and ``latency`` are `route_matrices` (what one transfer
    alone sees); ``hops`` counts the route's link directions; ``sharers`` is
    how many ordered device pairs use the route's busiest direction (the one
    the most pairs use: 1 on a flat cluster, where no pair shares), so
    ``bandwidth / sharers`` is the route's fair share when every pair sends.
    """

    bandwidth: np.ndarray
    latency: np.ndarray
    hops: np.ndarray
    sharers: np.ndarray


def route_facts(routes: Routes, num_devices: int) -> RouteFacts:
    """`RouteFacts` of every ordered device pair's route."""
    D = num_devices
    bw, lat = route_matrices(routes, D)
    pairs = pairs_per_direction(routes)
    hops = np.diff(routes.offset).reshape(D, D).astype(np.int64)
    sharers = np.zeros((D, D), dtype=np.int64)
    for k in range(D * D):
        rs = routes.resource[routes.offset[k]:routes.offset[k + 1]]
        if rs.size:
            sharers[k // D, k % D] = int(pairs[rs].max())
    return RouteFacts(bw, lat, hops, sharers)


def known_fields(entry: dict, allowed: Iterable[str], where: str) -> None:
    """Refuse fields a spec object does not take: a misspelt optional field would otherwise be dropped for its
    default, and the cluster silently be another machine.

    Raises
    ------
    ClusterError
        Naming each unknown field (with the nearest allowed one, where one is close) and the fields it takes.
    """
    allowed = sorted(allowed)
    unknown = sorted(set(entry) - set(allowed), key=str)
    if unknown:
        named = []
        for key in unknown:
            near = difflib.get_close_matches(str(key), allowed, n=1)
            named.append(f"{key!r}" + (f" (did you mean {near[0]!r}?)" if near else ""))
        raise ClusterError(f"{where}: unknown field(s) {', '.join(named)}; it takes {', '.join(map(repr, allowed))}")


def link_ends(entry: Any, where: str, noun: str) -> list[str]:
    """The two names a link entry's ``between`` joins, checked (flat ``links`` join devices, topology links nodes).

    Raises
    ------
    ClusterError
        If the entry is no object, or ``between`` is not a list of two names (the message says `where`).
    """
    if not isinstance(entry, dict):
        raise ClusterError(f"{where}: expected an object")
    between = entry.get("between")
    if not (isinstance(between, list) and len(between) == 2 and all(isinstance(x, str) for x in between)):
        raise ClusterError(f"{where}: 'between' must be a list of two {noun} names")
    return between


def positive_number(value: Any, what: str, where: str, allow_zero: bool = False) -> float:
    """`value` as a float if it is a finite positive number (or zero, with `allow_zero`).

    Raises
    ------
    ClusterError
        Starting with `where` and naming `what` otherwise (booleans are not numbers).
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ClusterError(f"{where}: {what} must be a finite number, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ClusterError(f"{where}: {what} must be {'non-negative' if allow_zero else 'positive'}, got {value}")
    return float(value)
