"""The throughput objective (max per-device load, MSR communication rule), checked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from placer.cluster import Cluster, Device, Link
from placer.errors import PlacementError, PlacerError
from placer.graph import Op, OpGraph
from placer.objectives import ThroughputModel, check_objective, evaluate
from placer.placement import Placement
from tests.placer.helpers import GB, devices, host_with_switch, two_device_cluster


def _cluster(memory: float = 100.0) -> Cluster:
    """CPU, G0, G1 (the MSR shape: a CPU plus accelerators)."""
    dev = dict(peak_flops=1e12, memory_bandwidth=1e11)
    return Cluster("c3", [Device("CPU", "cpu", memory_bytes=1e9, **dev),
                          Device("G0", "gpu", memory_bytes=memory, **dev),
                          Device("G1", "gpu", memory_bytes=memory, **dev)],
                   default_link=Link(1e9, 0.0))


def _diamond() -> OpGraph:
    """a -> {b, c} -> d with given transfer times (a: 0.5, b: 0.25, c: 1.0)."""
    return OpGraph("diamond", [
        Op("a", "X", [], cost={"gpu": 1.0, "cpu": 10.0}, transfer_time=0.5, param_bytes=40),
        Op("b", "X", ["a"], cost={"gpu": 2.0, "cpu": 20.0}, transfer_time=0.25, param_bytes=30),
        Op("c", "X", ["a"], cost={"gpu": 3.0, "cpu": 30.0}, transfer_time=1.0, param_bytes=20),
        Op("d", "X", ["b", "c"], cost={"gpu": 4.0, "cpu": 3.0}, param_bytes=10),
    ])


class TestThroughputModel:
    def test_hand_computed_four_nodes_with_cpu(self):
        """a,b on G0, c on G1, d on the CPU: the CPU pays no communication."""
        m = ThroughputModel(_diamond(), _cluster())
        loads = m.loads(np.array([1, 1, 2, 0]))
        # G0: a + b = 3, sends a (to G1) 0.5, sends b (to CPU) 0.25
        # G1: c = 3, receives a 0.5, sends c (to CPU) 1.0
        # CPU: d = 3 on the CPU, receives b and c for free
        assert loads.compute.tolist() == [3.0, 3.0, 3.0]
        assert loads.communication.tolist() == [0.0, 0.75, 1.5]
        assert loads.load.tolist() == [3.0, 3.75, 4.5]
        assert loads.max_load == 4.5
        assert loads.held_bytes.tolist() == [10.0, 70.0, 20.0]
        assert loads.memory_ok and loads.colocation_ok

    def test_send_charged_once_receive_once_per_device(self):
        """a feeds b and c, both on G1: a's transfer is charged once to each side."""
        m = ThroughputModel(_diamond(), _cluster())
        loads = m.loads(np.array([1, 2, 2, 1]))
        # G0: a + d = 5, send a 0.5, receive b 0.25, receive c 1.0
        # G1: b + c = 5, receive a 0.5, send b 0.25, send c 1.0
        assert loads.load.tolist() == [0.0, 6.75, 6.75]

    def test_one_device_has_no_communication(self):
        m = ThroughputModel(_diamond(), _cluster())
        assert m.loads(np.array([2, 2, 2, 2])).load.tolist() == [0.0, 0.0, 10.0]

    def test_memory_and_colocation_flags(self):
        g = _diamond()
        g = OpGraph("d2", [Op(**{**op.to_dict(), "colocation": "k" if op.name in "ad" else None}) for op in g.ops])
        m = ThroughputModel(g, _cluster(memory=60.0))
        loads = m.loads(np.array([1, 1, 2, 2]))
        assert not loads.memory_ok  # G0 holds 40 + 30 = 70 > 60
        assert not loads.colocation_ok  # a and d apart
        assert not loads.feasible
        assert m.loads(np.array([1, 2, 2, 1])).feasible

    def test_link_time_when_no_transfer_time(self):
        """Without a profiled transfer time: latency + bytes / bandwidth."""
        g = OpGraph("pair", [Op("x", "X", [], output_bytes=2e6, cost={"gpu": 1.0}),
                             Op("y", "X", ["x"], cost={"gpu": 1.0})])
        m = ThroughputModel(g, two_device_cluster(bandwidth=1e9, latency=1e-3))
        assert m.loads(np.array([0, 1])).load.tolist() == pytest.approx([1.003, 1.003])

    def test_all_cpu_cluster_pays_communication(self):
        g = OpGraph("pair", [Op("x", "X", [], cost={"cpu": 1.0}, transfer_time=0.5),
                             Op("y", "X", ["x"], cost={"cpu": 1.0})])
        m = ThroughputModel(g, two_device_cluster(kinds=("cpu", "cpu")))
        assert m.loads(np.array([0, 1])).load.tolist() == [1.5, 1.5]

    def test_cpu_only_op_on_accelerator_is_infinite(self):
        g = _diamond()
        g.meta["cpu_only_ops"] = ["d"]
        m = ThroughputModel(g, _cluster())
        assert m.max_load(np.array([1, 1, 1, 1])) == np.inf
        assert np.isfinite(m.max_load(np.array([1, 1, 1, 0])))

    def test_lower_bound(self):
        """Fastest times 1, 2, 3, 3 (d is faster on the CPU): 9 over 3 devices = 3 = the heaviest op."""
        m = ThroughputModel(_diamond(), _cluster())
        assert m.lower_bound() == 3.0
        g = OpGraph("co", [Op(**{**op.to_dict(), "colocation": "k" if op.name in "bc" else None})
                           for op in _diamond().ops])
        assert ThroughputModel(g, _cluster()).lower_bound() == 5.0  # b + c on one GPU

    def test_batch_matches_single(self):
        m = ThroughputModel(_diamond(), _cluster())
        rng = np.random.default_rng(0)
        batch = rng.integers(0, 3, size=(50, 4))
        expected = [m.max_load(row) for row in batch]
        assert m.max_load_batch(batch).tolist() == expected

    def test_bad_assignment_is_a_placement_error_like_the_simulators(self):
        m = ThroughputModel(_diamond(), _cluster())
        with pytest.raises(PlacementError, match="assignment has 3 entries; graph 'diamond' has 4 ops"):
            m.loads(np.array([0, 1, 2]))
        with pytest.raises(PlacementError, match=r"names device 3; cluster 'c3' has devices 0\.\.2"):
            m.max_load_batch(np.array([[0, 1, 2, 3]]))


class TestObjectives:
    def test_unknown_objective_is_an_error(self):
        with pytest.raises(PlacerError, match="unknown objective 'latency'"):
            check_objective("latency")

    def test_evaluate_fills_max_load_and_keeps_step_time(self):
        g, c = _diamond(), _cluster()
        given = Placement("diamond", "c3", "hand", {"a": "G0", "b": "G0", "c": "G1", "d": "CPU"})
        p = evaluate(g, c, given, "throughput")
        assert given.step_time is None and given.max_load is None and given.objective == "step_time"
        assert p.max_load == 4.5
        assert p.objective == "throughput"
        assert p.step_time is not None and p.step_time > 0
        assert Placement.from_dict(p.to_dict()).max_load == 4.5
        q = evaluate(g, c, Placement("diamond", "c3", "hand", dict(p.devices)), "step_time")
        assert q.max_load is None and q.step_time == p.step_time


class TestLinkLoads:
    """On a topology the link directions are loads too: a switch uplink no device's charge covers."""

    @staticmethod
    def gather():
        """a on g0 and b on g1 each send 1 GB to c on the host; 0.1 s of compute each."""
        cost = {"gpu": 0.1, "cpu": 0.1}
        return OpGraph("gather", [Op("a", "X", cost=cost, output_bytes=GB), Op("b", "X", cost=cost, output_bytes=GB),
                                  Op("c", "X", ["a", "b"], cost=cost)])

    def test_a_shared_uplink_is_the_busiest_load(self):
        """Devices: g0 and g1 0.1 + 1 s each (the host pays no communication); the uplink carries 2 s."""
        loads = ThroughputModel(self.gather(), host_with_switch()).loads(np.array([1, 2, 0]))
        assert loads.load.tolist() == pytest.approx([0.1, 1.1, 1.1, 0.0])
        assert loads.max_load == pytest.approx(2.0)
        assert loads.link_load.max() == pytest.approx(2.0)

    def test_batches_score_the_same(self):
        model = ThroughputModel(self.gather(), host_with_switch())
        a = np.array([[1, 2, 0], [1, 3, 0]])
        assert model.max_load_batch(a).tolist() == pytest.approx([model.max_load(x) for x in a])
        assert model.max_load_batch(a)[1] == pytest.approx(1.1)  # different switches: no shared uplink

    def test_the_flat_model_has_no_link_loads(self):
        flat = Cluster("flat", devices("cpu", "g0", "g1", "g2"), default_link=Link(GB, 0.0))
        loads = ThroughputModel(self.gather(), flat).loads(np.array([1, 2, 0]))
        assert loads.max_load == pytest.approx(1.1)
        assert loads.link_load.size == 0
