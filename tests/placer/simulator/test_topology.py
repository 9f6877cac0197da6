"""Hand-computed transfers over a topology: shared link directions, routes, and the flat model kept."""

import numpy as np
import pytest

from placer import presets
from placer.cluster import Cluster, Link
from placer.simulator import Simulator
from placer.simulator.reference import simulate_reference
from placer.synthetic import layered_graph
from placer.topology import Switch, TopoLink, Topology
from tests.placer.helpers import GB, devices, graph, host_with_switch, op


def both_ways(res, sim, a):
    """The kernel's step time, and the reference's equal to it."""
    assert simulate_reference(sim, a)[0] == pytest.approx(res.step_time, rel=1e-12)
    return res.step_time


class TestSharedSwitchUplink:
    def test_two_gpus_behind_one_switch_share_its_uplink(self):
        """g0 and g1 each send 1 GB to the host at t=1: one uplink of 1 GB/s, so 1-2 and 2-3; c runs 3-4."""
        g = graph(op("a", cost=1, out=GB), op("b", cost=1, out=GB), op("c", ["a", "b"], cost=1))
        sim = Simulator(g, host_with_switch())
        a = np.array([1, 2, 0])
        res = sim.run(a)
        assert (res.transfer_start[0, 0], res.transfer_end[0, 0]) == (1.0, 2.0)
        assert (res.transfer_start[1, 0], res.transfer_end[1, 0]) == (2.0, 3.0)
        assert both_ways(res, sim, a) == 4.0

    def test_gpus_behind_different_switches_send_at_once(self):
        """g0 (switch 0) and g2 (switch 1) share only the host's memory link, 1000x faster than PCIe.

        The memory link is busy 1 ms per 1 GB copy, so the second copy starts 1 ms after the first,
        not after the first's whole second (a fast link is not held at a slow route's pace).
        """
        g = graph(op("a", cost=1, out=GB), op("b", cost=1, out=GB), op("c", ["a", "b"], cost=1))
        sim = Simulator(g, host_with_switch())
        a = np.array([1, 3, 0])
        res = sim.run(a)
        assert (res.transfer_start[0, 0], res.transfer_end[0, 0]) == (1.0, 2.0)
        assert res.transfer_start[1, 0] == pytest.approx(1.001) and res.transfer_end[1, 0] == pytest.approx(2.001)
        assert both_ways(res, sim, a) == pytest.approx(3.001)

    def test_flat_model_gives_each_pair_its_own_link(self):
        """The same graph on the idealised model: both sends 1-2, c 2-3."""
        g = graph(op("a", cost=1, out=GB), op("b", cost=1, out=GB), op("c", ["a", "b"], cost=1))
        flat = Cluster("flat", devices("cpu", "g0", "g1", "g2"), default_link=Link(GB, 0.0))
        assert Simulator(g, flat).run(np.array([1, 2, 0])).step_time == 3.0


class TestFanOut:
    def test_one_gpu_to_seven_peers_takes_seven_sends(self):
        """g0's port carries all seven copies of its 1 GB output one after another: 1 + 7 + 1 s."""
        names = [f"g{i}" for i in range(8)]
        links = [TopoLink(n, "sw", GB, 0.0) for n in names]
        c = Cluster("fan", devices(*names), topology=Topology([Switch("sw", "pcie-switch")], links))
        g = graph(op("src", cost=1, out=GB), *[op(f"r{i}", ["src"], cost=1) for i in range(1, 8)])
        sim = Simulator(g, c)
        a = np.arange(8)
        res = sim.run(a)
        assert sorted(res.transfer_end[0, 1:]) == [2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
        assert both_ways(res, sim, a) == 9.0
        assert res.bytes_moved == 7 * GB

    def test_on_8gpu_flat_the_copies_overlap(self):
        """The issue's case: the flat model lets one port send seven copies at once (what 8gpu was before topologies)."""
        g = graph(op("src", cost=0, out=1.2e9), *[op(f"r{i}", ["src"], cost=0) for i in range(1, 8)])
        res = Simulator(g, presets.get("8gpu-flat")).run(np.arange(1, 9))
        assert res.step_time == pytest.approx(10e-6 + 1.2e9 / 12e9)


    def test_the_issues_case_on_the_v100_pcie_topology(self):
        """1.2 GB from GPU:0 to one reader on each of GPU:1..7: about seven single sends, not one (8gpu-flat's 0.100 s)."""
        g = graph(op("src", cost=0, out=1.2e9), *[op(f"r{i}", ["src"], cost=0) for i in range(1, 8)])
        c = presets.get("8gpu")
        gpus = [c.index[f"/device:GPU:{i}"] for i in range(8)]
        one = Simulator(graph(op("src", cost=0, out=1.2e9), op("r1", ["src"], cost=0)), c).run(np.array(gpus[:2]))
        seven = Simulator(g, c).run(np.array(gpus))
        assert one.step_time == pytest.approx(1.2e9 / 12e9, rel=1e-3)
        assert seven.step_time == pytest.approx(7 * one.step_time, rel=1e-3)


class TestNVLink:
    def _cluster(self):
        """g0 - g1 by NVLink (10 GB/s); both on a PCIe switch (1 GB/s) to the host."""
        links = [TopoLink("cpu", "sock", 1000 * GB), TopoLink("sw", "sock", GB), TopoLink("g0", "sw", GB),
                 TopoLink("g1", "sw", GB), TopoLink("g0", "g1", 10 * GB, kind="nvlink")]
        return Cluster("nv", devices("cpu", "g0", "g1"), topology=Topology(
            [Switch("sock", "cpu-socket"), Switch("sw", "pcie-switch")], links))

    def test_nvlink_transfer_leaves_pcie_idle(self):
        """a (g0) -> b (g1) over NVLink, 1-1.1, while a -> c (host) takes the PCIe route at the same time, 1-2."""
        g = graph(op("a", cost=1, out=GB), op("b", ["a"], cost=1), op("c", ["a"], cost=1))
        c = self._cluster()
        assert c.compiled.paths[("g0", "g1")] == ("g0", "g1")
        sim = Simulator(g, c)
        a = np.array([1, 2, 0])
        res = sim.run(a)
        assert (res.transfer_start[0, 2], res.transfer_end[0, 2]) == (1.0, pytest.approx(1.1))
        assert (res.transfer_start[0, 0], res.transfer_end[0, 0]) == (1.0, 2.0)
        assert both_ways(res, sim, a) == 3.0


class TestTwoHops:
    def test_two_hop_route_time(self):
        """g0 -(2 GB/s, 1 ms)- sw -(1 GB/s, 2 ms)- g1: 3 ms + 1 GB / 1 GB/s; 1 + 1.003 + 1."""
        links = [TopoLink("g0", "sw", 2 * GB, 1e-3), TopoLink("g1", "sw", GB, 2e-3)]
        c = Cluster("hop", devices("g0", "g1"), topology=Topology([Switch("sw", "pcie-switch")], links))
        assert c.link("g0", "g1") == Link(GB, 3e-3)
        g = graph(op("a", cost=1, out=GB), op("b", ["a"], cost=1))
        sim = Simulator(g, c)
        res = sim.run(np.array([0, 1]))
        assert res.transfer_end[0, 1] - res.transfer_start[0, 1] == pytest.approx(1.003)
        assert both_ways(res, sim, np.array([0, 1])) == pytest.approx(3.003)


class TestCrossNode:
    def test_cross_node_transfers_share_the_nic(self):
        """g0 and g1 (node A, one NIC of 1 GB/s, ports 4 GB/s) each send 1 GB to g2 (node B): 1-2, then 2-3."""
        links = [TopoLink("g0", "swA", 4 * GB), TopoLink("g1", "swA", 4 * GB), TopoLink("nicA", "swA", 4 * GB),
                 TopoLink("nicA", "ib", GB), TopoLink("nicB", "ib", GB), TopoLink("nicB", "swB", 4 * GB),
                 TopoLink("g2", "swB", 4 * GB)]
        switches = [Switch(n, k) for n, k in (("swA", "pcie-switch"), ("swB", "pcie-switch"), ("nicA", "nic"),
                                              ("nicB", "nic"), ("ib", "ib-switch"))]
        c = Cluster("two-nodes", devices("g0", "g1", "g2"), topology=Topology(switches, links))
        g = graph(op("a", cost=1, out=GB), op("b", cost=1, out=GB), op("c", ["a", "b"], cost=1))
        sim = Simulator(g, c)
        a = np.array([0, 1, 2])
        res = sim.run(a)
        assert (res.transfer_start[0, 2], res.transfer_end[0, 2]) == (1.0, 2.0)
        assert (res.transfer_start[1, 2], res.transfer_end[1, 2]) == (2.0, 3.0)
        assert both_ways(res, sim, a) == 4.0

    def test_two_dgx_a100_one_gpu_to_two_remote_gpus_shares_its_nic(self):
        """GPU:0 of node 0 sends 1 GB to GPU:0 and GPU:1 of node 1: both through its NIC 0, one after the other."""
        c = presets.get("2x-dgx-a100")
        src = c.index["/job:worker/replica:0/task:0/device:GPU:0"]
        dst = [c.index[f"/job:worker/replica:0/task:1/device:GPU:{i}"] for i in (0, 1)]
        g = graph(op("a", cost=0, out=GB), op("b", ["a"], cost=0), op("c", ["a"], cost=0))
        res = Simulator(g, c).run(np.array([src, *dst]))
        first, second = sorted(res.transfer_start[0, dst])
        assert second - first == pytest.approx(GB / 25e9 + 1e-6)  # NIC 0 -> IB switch is busy that long
        assert res.step_time == pytest.approx(second + c.link(c.device_names[src], c.device_names[dst[1]]).latency
                                              + GB / 25e9)

    def test_two_dgx_a100_crossing_goes_at_hdr_speed(self):
        g = graph(op("a", cost=0, out=GB), op("b", ["a"], cost=0))
        c = presets.get("2x-dgx-a100")
        gpu0 = c.index["/job:worker/replica:0/task:0/device:GPU:0"]
        remote = c.index["/job:worker/replica:0/task:1/device:GPU:0"]
        res = Simulator(g, c).run(np.array([gpu0, remote]))
        assert res.step_time == pytest.approx(c.link(c.device_names[gpu0], c.device_names[remote]).latency + GB / 25e9)


class TestFlatKept:
    def test_full_mesh_topology_equals_the_flat_spec(self):
        """One direct link per pair, as a topology, gives the flat spec's step times bit for bit."""
        flat = presets.get("4gpu-nvlink-flat")
        names = flat.device_names
        links = [TopoLink(a, b, flat.link(a, b).bandwidth, flat.link(a, b).latency)
                 for i, a in enumerate(names) for b in names[i + 1:]]
        mesh = Cluster("mesh", flat.devices, topology=Topology([], links))
        g = layered_graph(600, seed=2)
        rng = np.random.default_rng(0)
        sim_flat, sim_mesh = Simulator(g, flat), Simulator(g, mesh)
        for _ in range(5):
            a = rng.integers(0, len(names), len(g))
            assert sim_flat.run(a).step_time == sim_mesh.run(a).step_time
            np.testing.assert_array_equal(sim_flat.run(a).transfer_end, sim_mesh.run(a).transfer_end)

    def test_flat_preset_step_times_are_todays(self):
        """Recorded before topologies existed, when 8gpu-nvlink was flat (the golden check covers graphs/ on the -flat presets)."""
        g = layered_graph(2000, seed=1)
        a = np.random.default_rng(0).integers(0, 9, len(g))
        assert repr(Simulator(g, presets.get("8gpu-nvlink-flat")).run(a).step_time) == TODAY_8GPU_NVLINK


TODAY_8GPU_NVLINK = "0.24539115830913935"  # main at cf822e4, before topologies
