"""Cluster: the devices a graph can be placed on and the links between them.

A cluster comes from a JSON spec or a named preset (`placer.presets`, whose
`load_cluster` reads either: presets build on this module). Its interconnect
is one of two kinds:

- flat (``links`` / ``default_link``), the idealised model: every pair of
  devices is joined by a link of its own, one given for the pair or the
  cluster's default link. A link is full duplex: each direction has the given
  bandwidth and latency and carries one transfer at a time;
- a topology (``topology``, `placer.topology`): devices and switches joined
  by links whose directions are shared by every transfer routed over them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from placer.errors import ClusterError, PlacerError
from placer.topology import CompiledTopology, Routes, Topology, flat_routes, known_fields, link_ends, positive_number

TASK_PREFIX = re.compile(r"^(/job:[^/]+/replica:\d+/task:\d+)/")


def machine_of(device: str) -> str:
    """The TensorFlow task a device name is on (``/job:worker/replica:0/task:1``): one process, on one machine
    (`Cluster.nodes`); "" for a local name (``/device:GPU:0``)."""
    task = TASK_PREFIX.match(device)
    return task.group(1) if task else ""


@dataclass(frozen=True, slots=True)
class Device:
    """One device.

    Attributes
    ----------
    name : TensorFlow-style device name, e.g. ``"/device:GPU:0"``.
    kind : ``"gpu"`` or ``"cpu"`` (any string; ops' ``cost`` is keyed by it).
    peak_flops : peak floating-point operations per second (FP32).
    memory_bandwidth : bytes per second between the device and its memory.
    memory_bytes : memory available for weights and activations.
    op_overhead : seconds added to every op's kernel (the gap between
        back-to-back kernels; the plain roofline's fixed cost per op).
    matrix_flops : peak rate of matrix ops (MatMul, convolutions...) as the
        framework runs them, e.g. TF32 tensor cores; None: `peak_flops`.
    matrix_efficiency : achieved / peak rate of matrix ops, their FLOPs counted as
        direct multiply-adds (Winograd convolutions can take it above 1).
    memory_efficiency : fraction of `memory_bandwidth` that ops achieve.
    dispatch : host seconds to issue one op; an op holds the device for at
        least this long (kernels queue, so dispatch overlaps the kernels).
    fusion : element-wise chains run as one kernel, relabelling ops move no
        bytes (XLA-style; `placer.cost_model`).

    The optional fields' defaults give the plain roofline of `placer.cost_model`.
    """

    name: str
    kind: str
    peak_flops: float
    memory_bandwidth: float
    memory_bytes: float
    op_overhead: float = 0.0
    matrix_flops: float | None = None
    matrix_efficiency: float = 1.0
    memory_efficiency: float = 1.0
    dispatch: float = 0.0
    fusion: bool = False

    @property
    def matrix_rate(self) -> float:
        """FLOP/s that matrix ops achieve: ``matrix_flops`` (or ``peak_flops``) x ``matrix_efficiency``."""
        return (self.peak_flops if self.matrix_flops is None else self.matrix_flops) * self.matrix_efficiency

    def to_dict(self) -> dict[str, Any]:
        """The device in the JSON spec format; optional fields only where they differ from their defaults
        (so a spec without them, and its fingerprint, read as before)."""
        d: dict[str, Any] = {
            "name": self.name, "kind": self.kind, "peak_flops": self.peak_flops,
            "memory_bandwidth": self.memory_bandwidth, "memory_bytes": self.memory_bytes,
            "op_overhead": self.op_overhead,
        }
        for key, default in _OPTIONAL_DEFAULTS.items():
            if getattr(self, key) != default:
                d[key] = getattr(self, key)
        return d


_OPTIONAL_DEFAULTS: dict[str, Any] = {"matrix_flops": None, "matrix_efficiency": 1.0, "memory_efficiency": 1.0,
                                      "dispatch": 0.0, "fusion": False}
DEVICE_FIELDS = ("name", "kind", "peak_flops", "memory_bandwidth", "memory_bytes", "op_overhead",
                 *_OPTIONAL_DEFAULTS)
"""The fields a device of the spec takes (`Device.to_dict` writes them); any other is refused."""
LINK_FIELDS = ("bandwidth", "latency")
CLUSTER_FIELDS = ("name", "devices", "links", "default_link", "shared_threads", "topology", "meta")


@dataclass(frozen=True, slots=True)
class Link:
    """A full-duplex link: each direction moves `bandwidth` bytes/s after `latency` s."""

    bandwidth: float
    latency: float

    def transfer_time(self, nbytes: float) -> float:
        return self.latency + nbytes / self.bandwidth


@dataclass
class Cluster:
    """Devices plus a link for every pair of them.

    Parameters
    ----------
    name : the cluster's name.
    devices : the devices, in the order placements index them.
    links : explicit links keyed by a pair of device names (either order).
    default_link : the link for every pair not in `links`.
    meta : sources and notes (presets say what hardware they model).
    shared_threads : when set, the devices are not separate hardware but share
        one pool of this many threads (TensorFlow's inter-op pool, for logical
        CPU devices of one process): at most this many ops run at once in the
        whole cluster, and one device may run several. None: every device is
        its own hardware and runs one op at a time.
    topology : switches and links joining the devices, with shared link
        directions and routes (`placer.topology`); given instead of `links`
        and `default_link`. None: the flat model.
    """

    name: str
    devices: list[Device]
    links: dict[frozenset, Link] = field(default_factory=dict)
    default_link: Link | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    shared_threads: int | None = None
    topology: Topology | None = None

    def __post_init__(self) -> None:
        if not self.devices:
            raise ClusterError(f"cluster {self.name!r}: has no devices")
        t = self.shared_threads
        if t is not None and (isinstance(t, bool) or not isinstance(t, int) or t < 1):
            raise ClusterError(f"cluster {self.name!r}: 'shared_threads' must be a positive integer, got {t!r}")
        self.index = {}
        for i, d in enumerate(self.devices):
            if d.name in self.index:
                raise ClusterError(f"cluster {self.name!r}: duplicate device name {d.name!r}")
            self.index[d.name] = i
        self.compiled: CompiledTopology | None = None
        if self.topology is not None:
            if self.links or self.default_link is not None:
                raise ClusterError(f"cluster {self.name!r}: give either a 'topology' or flat 'links'/'default_link', "
                                   "not both")
            self.compiled = self.topology.compile(self.device_names, f"cluster {self.name!r}")
            return
        for pair in self.links:
            for dev in pair:
                if dev not in self.index:
                    raise ClusterError(f"cluster {self.name!r}: link names unknown device {dev!r}")
        for i, a in enumerate(self.devices):
            for b in self.devices[i + 1:]:
                if frozenset((a.name, b.name)) not in self.links and self.default_link is None:
                    raise ClusterError(
                        f"cluster {self.name!r}: no link between {a.name!r} and {b.name!r} and no default_link"
                    )

    def __len__(self) -> int:
        return len(self.devices)

    @property
    def device_names(self) -> list[str]:
        return [d.name for d in self.devices]

    def nodes(self) -> list[list[int]]:
        """The device indices of each machine, in order: devices named for one TensorFlow task
        (``/job:J/replica:R/task:T/device:...``) share a machine; a cluster whose names carry no task is one."""
        by_task: dict[str, list[int]] = {}
        for i, d in enumerate(self.devices):
            by_task.setdefault(machine_of(d.name), []).append(i)
        return list(by_task.values())

    def restricted(self, indices: list[int], name: str | None = None) -> "Cluster":
        """The cluster of these devices alone (one machine of several, say), with the links among them:
        the same hardware a placement on them alone sees in this cluster."""
        keep = [self.devices[i] for i in indices]
        names = {d.name for d in keep}
        if len(keep) == 1:  # one device needs no link
            return Cluster(name or f"{self.name}[1 device]", keep, meta=dict(self.meta),
                           shared_threads=self.shared_threads)
        topology = None if self.compiled is None else self.compiled.restricted(names)
        links = {pair: l for pair, l in self.links.items() if pair <= names}
        return Cluster(name or f"{self.name}[{len(keep)} devices]", keep, links, self.default_link, dict(self.meta),
                       self.shared_threads, topology)

    def link(self, a: str, b: str) -> Link:
        """The link between two distinct devices.

        With a topology: the route from `a` to `b` as one link, its bottleneck
        bandwidth and summed latency (what one transfer on an idle machine sees).
        """
        if a == b:
            raise ClusterError(f"no link from device {a!r} to itself")
        if self.compiled is not None:
            bw, lat = self.link_matrices()
            i, j = self.index[a], self.index[b]
            return Link(float(bw[i, j]), float(lat[i, j]))
        return self.links.get(frozenset((a, b))) or self.default_link  # type: ignore[return-value]

    def routes(self) -> Routes:
        """Each ordered device pair's route as link directions (`placer.topology.Routes`).

        Flat: pair (i, j) has its own direction, the pair's link. Topology: the
        routes of `placer.topology`, whose link directions pairs share.
        """
        if self.compiled is not None:
            return self.compiled.routes()
        return flat_routes(*self.link_matrices())

    def link_matrices(self) -> tuple[np.ndarray, np.ndarray]:
        """``(bandwidth, latency)`` as D x D arrays (diagonal: inf bandwidth, 0 latency).

        With a topology: each route's bottleneck bandwidth and summed latency.
        """
        if self.compiled is not None:
            return self.compiled.matrices()
        n = len(self.devices)
        bw = np.full((n, n), np.inf)
        lat = np.zeros((n, n))
        for i, a in enumerate(self.devices):
            for j, b in enumerate(self.devices):
                if i != j:
                    link = self.link(a.name, b.name)
                    bw[i, j], lat[i, j] = link.bandwidth, link.latency
        return bw, lat

    @property
    def fingerprint(self) -> str:
        """A short hash of the hardware (devices, links, shared threads; not `name` or `meta`).

        Saved runs and comparison rows record it, so that a cluster file
        edited under the same name (a faster link, more memory) is not
        answered with results made for the old one. Numbers hash by value
        (16 and 16.0 alike): a preset and the file `placer clusters` writes
        of it, which reads back as floats, are the same hardware.
        """
        return self._hash(by_value=True)

    def same_hardware(self, fingerprint: str | None) -> bool:
        """Whether a `fingerprint` saved with a run is this cluster's (None: the run saved none). Runs saved
        before numbers hashed by value kept one that told a preset's integers from floats; it still matches."""
        return fingerprint is None or fingerprint in (self.fingerprint, self._hash(by_value=False))

    def _hash(self, by_value: bool) -> str:
        import hashlib
        import json

        spec = {k: v for k, v in self.to_dict().items() if k not in ("name", "meta")}
        if "links" in spec:
            spec["links"] = sorted(spec["links"], key=lambda l: l["between"])
        if by_value:
            spec = _floats(spec)
        return hashlib.sha256(json.dumps(spec, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        """The cluster in the JSON spec format."""
        d: dict[str, Any] = {
            "name": self.name,
            "devices": [dev.to_dict() for dev in self.devices],
        }
        if self.topology is None:
            d["links"] = [
                {"between": sorted(pair), "bandwidth": l.bandwidth, "latency": l.latency}
                for pair, l in self.links.items()
            ]
        if self.default_link is not None:
            d["default_link"] = {"bandwidth": self.default_link.bandwidth, "latency": self.default_link.latency}
        if self.shared_threads is not None:
            d["shared_threads"] = self.shared_threads
        if self.topology is not None:
            d["topology"] = self.topology.to_dict()
        if self.meta:
            d["meta"] = self.meta
        return d

    @classmethod
    def from_dict(cls, data: Any) -> "Cluster":
        """Parse and check a cluster spec; errors name the device or link."""
        if not isinstance(data, dict):
            raise ClusterError("cluster: expected a JSON object with 'name' and 'devices'")
        name = data.get("name")
        if not isinstance(name, str) or not name:
            raise ClusterError("cluster: 'name' must be a non-empty string")
        known_fields(data, CLUSTER_FIELDS, f"cluster {name!r}")
        devs = data.get("devices")
        if not isinstance(devs, list) or not devs:
            raise ClusterError(f"cluster {name!r}: 'devices' must be a non-empty list")
        devices = [_device_from_dict(d, k, name) for k, d in enumerate(devs)]
        links: dict[frozenset, Link] = {}
        listed: dict[frozenset, int] = {}
        raw_links = data.get("links", [])
        if not isinstance(raw_links, list):
            raise ClusterError(f"cluster {name!r}: 'links' must be a list")
        for k, l in enumerate(raw_links):
            where = f"cluster {name!r}: link #{k}"
            between = link_ends(l, where, "device")
            if between[0] == between[1]:
                raise ClusterError(f"{where}: joins device {between[0]!r} to itself")
            known_fields(l, ("between", *LINK_FIELDS), where)
            pair = frozenset(between)
            if pair in listed:  # the later one silently won
                raise ClusterError(f"{where}: devices {between[0]!r} and {between[1]!r} are already joined by link "
                                   f"#{listed[pair]}; give each pair one link")
            listed[pair] = k
            links[pair] = _link_from_dict(l, where)
        default = data.get("default_link")
        if isinstance(default, dict) and "between" in default:
            raise ClusterError(f"cluster {name!r}: default_link is for every pair 'links' does not list; it takes no "
                               "'between' (list a link between two devices in 'links')")
        default_link = None if default is None else _link_from_dict(default, f"cluster {name!r}: default_link")
        meta = data.get("meta", {})
        topology = None if data.get("topology") is None else Topology.from_dict(data["topology"], f"cluster {name!r}")
        return cls(name, devices, links, default_link, meta if isinstance(meta, dict) else {},
                   shared_threads=data.get("shared_threads"), topology=topology)


def _floats(value: Any) -> Any:
    """`value` (a spec) with every integer (not a boolean) as a float."""
    if isinstance(value, dict):
        return {k: _floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_floats(v) for v in value]
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


_positive = positive_number


def _device_from_dict(d: Any, k: int, cluster: str) -> Device:
    if not isinstance(d, dict):
        raise ClusterError(f"cluster {cluster!r}: device #{k}: expected an object")
    name = d.get("name")
    if not isinstance(name, str) or not name:
        raise ClusterError(f"cluster {cluster!r}: device #{k}: 'name' must be a non-empty string")
    where = f"cluster {cluster!r}: device {name!r}"
    known_fields(d, DEVICE_FIELDS, where)
    kind = d.get("kind")
    if not isinstance(kind, str) or not kind:
        raise ClusterError(f"{where}: 'kind' must be a non-empty string such as 'gpu' or 'cpu'")
    return Device(
        name=name,
        kind=kind.lower(),
        peak_flops=_positive(d.get("peak_flops"), "'peak_flops'", where),
        memory_bandwidth=_positive(d.get("memory_bandwidth"), "'memory_bandwidth'", where),
        memory_bytes=_positive(d.get("memory_bytes"), "'memory_bytes'", where),
        op_overhead=_positive(d.get("op_overhead", 0.0), "'op_overhead'", where, allow_zero=True),
        matrix_flops=None if d.get("matrix_flops") is None else _positive(d["matrix_flops"], "'matrix_flops'", where),
        matrix_efficiency=_positive(d.get("matrix_efficiency", 1.0), "'matrix_efficiency'", where),
        memory_efficiency=_fraction(d.get("memory_efficiency", 1.0), "'memory_efficiency'", where),
        dispatch=_positive(d.get("dispatch", 0.0), "'dispatch'", where, allow_zero=True),
        fusion=_flag(d.get("fusion", False), "'fusion'", where),
    )


def _fraction(value: Any, what: str, where: str) -> float:
    x = _positive(value, what, where)
    if x > 1:
        raise ClusterError(f"{where}: {what} must be a fraction in (0, 1], got {value!r}")
    return x


def _flag(value: Any, what: str, where: str) -> bool:
    if not isinstance(value, bool):
        raise ClusterError(f"{where}: {what} must be true or false, got {value!r}")
    return value


def _link_from_dict(l: Any, where: str) -> Link:
    if not isinstance(l, dict):
        raise ClusterError(f"{where}: expected an object with 'bandwidth' and 'latency'")
    if "between" not in l:  # a flat link's ends were checked by its caller
        known_fields(l, LINK_FIELDS, where)
    return Link(
        bandwidth=_positive(l.get("bandwidth"), "'bandwidth'", where),
        latency=_positive(l.get("latency", 0.0), "'latency'", where, allow_zero=True),
    )


__all__ = ["Cluster", "Device", "Link", "PlacerError"]
