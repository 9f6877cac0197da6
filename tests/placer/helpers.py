"""Small builders for hand-computed test cases."""

from __future__ import annotations

from placer.cluster import Cluster, Device, Link
from placer.graph import Op, OpGraph
from placer.topology import Switch, TopoLink, Topology

GB = 1e9


def two_device_cluster(bandwidth: float = 1e9, latency: float = 0.0, memory: float = 1e12,
                       kinds: tuple[str, str] = ("gpu", "gpu")) -> Cluster:
    """Two equal devices 'A' and 'B' joined by one link."""
    devices = [Device(name, kind, 1e12, 1e11, memory) for name, kind in zip("AB", kinds)]
    return Cluster("pair", devices, default_link=Link(bandwidth, latency))


def op(name: str, inputs=(), cost: float = 1.0, out: float = 0.0, params: float = 0.0, **kw) -> Op:
    """An op that takes `cost` seconds on any device kind used in the tests."""
    return Op(name, "Test", list(inputs), output_bytes=out, param_bytes=params,
              cost={"gpu": cost, "cpu": cost}, **kw)


def graph(*ops: Op, name: str = "g") -> OpGraph:
    return OpGraph(name, list(ops))


def devices(*names: str) -> list[Device]:
    """Devices named `names`: ``"cpu"`` a CPU, any other a GPU; 1 TFLOP/s, 100 GB/s, 1 TB each."""
    return [Device(n, "cpu" if n == "cpu" else "gpu", 1e12, 1e11, 1e12) for n in names]


def host_with_switch(uplink: float = GB, port: float = GB, memory: float = 1000 * GB) -> Cluster:
    """cpu - socket - one PCIe switch - g0, g1; g2 on a switch of its own; no latency."""
    links = [TopoLink("cpu", "sock", memory), TopoLink("sw0", "sock", uplink), TopoLink("sw1", "sock", uplink),
             TopoLink("g0", "sw0", port), TopoLink("g1", "sw0", port), TopoLink("g2", "sw1", port)]
    return Cluster("host", devices("cpu", "g0", "g1", "g2"), topology=Topology(
        [Switch("sock", "cpu-socket"), Switch("sw0", "pcie-switch"), Switch("sw1", "pcie-switch")], links))


def two_switches() -> Cluster:
    """g0, g1 behind sw0 and g2, g3 behind sw1, the switches' uplinks (1 GB/s) 10x slower than the GPU ports."""
    links = [TopoLink("sw0", "sock", GB), TopoLink("sw1", "sock", GB)] + [
        TopoLink(f"g{i}", f"sw{i // 2}", 10 * GB) for i in range(4)]
    return Cluster("two", devices("g0", "g1", "g2", "g3"), topology=Topology(
        [Switch("sock", "cpu-socket"), Switch("sw0", "pcie-switch"), Switch("sw1", "pcie-switch")], links))
