"""Small builders for hand-computed test cases."""

from __future__ import annotations

from placer.cluster import Cluster, Device, Link
from placer.graph import Op, OpGraph


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
