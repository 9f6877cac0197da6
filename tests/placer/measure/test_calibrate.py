"""Calibrating a cluster's links from timed copies (a fake prober on topologies; TensorFlow on local:2)."""

from __future__ import annotations

import pytest

from placer import presets
from placer.cluster import Cluster, Device
from placer.errors import PlacerError
from placer.measure.calibrate import TFProber, calibrate, concurrent_sets
from placer.topology import Switch, TopoLink, Topology

GPU = dict(kind="gpu", peak_flops=1e13, memory_bandwidth=1e12, memory_bytes=1e10)


def switched() -> Cluster:
    """Three GPUs behind one PCIe switch (10 GB/s ports, 5 us each)."""
    devices = [Device(f"/device:GPU:{i}", **GPU) for i in range(3)]
    links = [TopoLink(f"/device:GPU:{i}", "sw", 10e9, 5e-6) for i in range(3)]
    return Cluster("box", devices, topology=Topology([Switch("sw", "pcie-switch")], links))


class FakeProber:
    """Each copy costs 4 us + bytes / 5 GB/s; transfers out of one device serialise, others overlap."""

    def __init__(self):
        self.calls = []

    def extra_seconds(self, transfers, nbytes):
        self.calls.append((tuple(transfers), nbytes))
        one = 4e-6 + nbytes / 5e9
        sources = [a for a, _ in transfers]
        return one * max(sources.count(s) for s in sources)


def test_topology_links_take_the_measured_rates():
    prober = FakeProber()
    out = calibrate(switched(), prober, small_bytes=0, large_bytes=10**6)
    bw, lat = out.link_matrices()
    assert bw[0, 1] == pytest.approx(5e9) and lat[0, 1] == pytest.approx(4e-6)
    assert out.topology is not None and len(out.topology.links) == 3
    report = out.meta["calibration"]
    assert len(report["pairs"]) == 6
    shared = {tuple(map(tuple, c["transfers"])): c["shared"] for c in report["concurrent"]}
    assert shared[(("/device:GPU:0", "/device:GPU:1"), ("/device:GPU:0", "/device:GPU:2"))] is True
    assert shared[(("/device:GPU:0", "/device:GPU:1"), ("/device:GPU:1", "/device:GPU:0"))] is False


def test_flat_cluster_gets_a_link_per_pair():
    out = calibrate(presets.get("local:3"), FakeProber(), small_bytes=0, large_bytes=10**6)
    assert len(out.links) == 3 and out.default_link.bandwidth == pytest.approx(5e9)
    assert out.shared_threads == 1


def test_concurrent_sets_are_capped():
    assert len(concurrent_sets(switched(), 4)) == 4


def test_one_device_has_no_link():
    with pytest.raises(PlacerError, match="one device"):
        calibrate(presets.get("local:1"), FakeProber())


def test_tensorflow_on_two_logical_cpus():
    """The real prober, as small as it goes: every number is there and positive."""
    out = calibrate(presets.get("local"), TFProber(copies=4, rounds=1, per_round=1), large_bytes=1 << 16,
                    max_concurrent=1)
    report = out.meta["calibration"]
    assert len(report["pairs"]) == 2 and len(report["concurrent"]) == 1
    assert out.default_link.latency >= 0 and out.default_link.bandwidth > 0
