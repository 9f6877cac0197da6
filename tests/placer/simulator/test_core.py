"""Hand-computed step times, transfers, memory and bounds."""

import numpy as np
import pytest

from placer.errors import PlacementError, PlacerError
from placer.placement import Placement
from placer.simulator import Simulator
from tests.placer.helpers import graph, op, two_device_cluster

A, B = 0, 1


class TestChain:
    def test_chain_on_one_device_is_the_sum_of_costs(self):
        """a -> b -> c on one device runs back to back."""
        g = graph(op("a", cost=1), op("b", ["a"], cost=2), op("c", ["b"], cost=3))
        res = Simulator(g, two_device_cluster()).run(np.array([A, A, A]))
        assert res.step_time == 6.0
        assert list(res.start) == [0.0, 1.0, 3.0]
        assert list(res.busy) == [6.0, 0.0]
        assert res.bytes_moved == 0.0

    def test_chain_split_pays_each_crossing(self):
        """Each crossing costs latency + bytes / bandwidth."""
        g = graph(op("a", cost=1, out=2e9), op("b", ["a"], cost=2, out=1e9), op("c", ["b"], cost=3))
        res = Simulator(g, two_device_cluster(bandwidth=1e9, latency=0.25)).run(np.array([A, B, A]))
        # a 0-1, send 1-3.25, b 3.25-5.25, send 5.25-6.5, c 6.5-9.5
        assert res.step_time == pytest.approx(9.5)
        assert res.bytes_moved == 3e9


class TestForkJoin:
    def _g(self):
        return graph(op("s", cost=1, out=1e9), op("x", ["s"], cost=4, out=1e9),
                     op("y", ["s"], cost=4, out=1e9), op("j", ["x", "y"], cost=1))

    def test_all_on_one_device(self):
        res = Simulator(self._g(), two_device_cluster()).run(np.array([A, A, A, A]))
        assert res.step_time == 10.0

    def test_split_runs_the_branches_in_parallel(self):
        # s 0-1; x on A 1-5; send s->B 1-2; y on B 2-6; send y->A 6-7; j 7-8
        res = Simulator(self._g(), two_device_cluster(bandwidth=1e9)).run(np.array([A, A, B, A]))
        assert res.step_time == pytest.approx(8.0)
        assert res.transfer_start[0, B] == pytest.approx(1.0)
        assert res.transfer_end[2, A] == pytest.approx(7.0)

    @pytest.mark.parametrize("latency, bandwidth, expected", [
        (0.0, 1e9, 8.0),     # 1 s per crossing: split wins (8 < 10)
        (1.0, 1e9, 10.0),    # 2 s per crossing: 1 + 2 + 4 + 2 + 1 = 10, a tie
        (0.0, 2.5e8, 14.0),  # 4 s per crossing: split loses
    ])
    def test_latency_and_bandwidth_decide(self, latency, bandwidth, expected):
        res = Simulator(self._g(), two_device_cluster(bandwidth, latency)).run(np.array([A, A, B, A]))
        assert res.step_time == pytest.approx(expected)


class TestTransfers:
    def test_sent_once_per_consumer_device(self):
        """Two consumers on B of one tensor: one transfer."""
        g = graph(op("p", cost=1, out=1e9), op("c1", ["p"]), op("c2", ["p"]))
        res = Simulator(g, two_device_cluster(bandwidth=1e9)).run(np.array([A, B, B]))
        assert res.bytes_moved == 1e9
        # p 0-1, send 1-2, c1 2-3, c2 3-4
        assert res.step_time == pytest.approx(4.0)

    def test_a_link_carries_one_transfer_at_a_time(self):
        """Two tensors ready together on A queue on the A->B link."""
        g = graph(op("p", cost=1), op("q1", ["p"], cost=1, out=1e9), op("q2", ["p"], cost=1, out=1e9),
                  op("r1", ["q1"], cost=0.5), op("r2", ["q2"], cost=0.5))
        # q1 1-2 send 2-3, q2 2-3 send 3-4: r1 3-3.5, r2 4-4.5
        res = Simulator(g, two_device_cluster(bandwidth=1e9)).run(np.array([A, A, A, B, B]))
        assert res.step_time == pytest.approx(4.5)

    def test_link_directions_are_independent(self):
        """Full duplex: A->B and B->A transfers overlap."""
        g = graph(op("a", cost=1, out=1e9), op("b", cost=1, out=1e9),
                  op("ca", ["b"], cost=1), op("cb", ["a"], cost=1))
        res = Simulator(g, two_device_cluster(bandwidth=1e9)).run(np.array([A, B, A, B]))
        assert res.step_time == pytest.approx(3.0)

    def test_given_transfer_time_replaces_the_link_model(self):
        g = graph(op("a", cost=1, out=1e9, transfer_time=0.125), op("b", ["a"], cost=1))
        res = Simulator(g, two_device_cluster(bandwidth=1.0, latency=5.0)).run(np.array([A, B]))
        assert res.step_time == pytest.approx(2.125)

    def test_transfers_listed_and_tabled(self):
        """Each transfer once in the list (op, device, start, end), and the same in the [op, device] tables."""
        g = graph(op("p", cost=1, out=1e9), op("c1", ["p"]), op("c2", ["p"]), op("q", cost=1))
        res = Simulator(g, two_device_cluster(bandwidth=1e9)).run(np.array([A, B, B, A]))
        assert (res.send_op.tolist(), res.send_dev.tolist()) == ([0], [B])
        assert (res.send_start[0], res.send_end[0]) == (1.0, 2.0)
        expected = np.full((4, 2), -1.0)
        expected[0, B] = 1.0
        np.testing.assert_array_equal(res.transfer_start, expected)
        expected[0, B] = 2.0
        np.testing.assert_array_equal(res.transfer_end, expected)


class TestOpOrder:
    def test_ops_listed_out_of_topological_order(self):
        """The kernel renumbers ops by topological rank; listed in any order, it agrees with the reference."""
        from placer import presets
        from placer.graph import OpGraph
        from placer.simulator.reference import simulate_reference
        from placer.synthetic import layered_graph

        g = layered_graph(300, seed=2)
        g = OpGraph(g.name, [g.ops[i] for i in np.random.default_rng(0).permutation(len(g))])
        assert not np.array_equal(g.topo_order, np.arange(len(g)))
        sim = Simulator(g, presets.get("8gpu"))
        a = np.random.default_rng(1).integers(0, sim.num_devices, len(g))
        res = sim.run(a)
        step, busy, peak, moved = simulate_reference(sim, a)
        assert res.step_time == pytest.approx(step, rel=1e-12) and res.bytes_moved == pytest.approx(moved)
        np.testing.assert_allclose(res.busy, busy, rtol=1e-12)
        np.testing.assert_allclose(res.peak_memory, peak, rtol=1e-12)
        assert (res.finish >= res.start).all() and res.finish.max() == res.step_time


class TestReadyOrder:
    def test_earliest_ready_runs_first(self):
        """While A is busy, z becomes ready (at 1) before w (at 2): A runs z first, despite w's lower rank."""
        g = graph(op("L", cost=5), op("x", cost=1), op("y", ["x"], cost=1),
                  op("w", ["y"], cost=1), op("z", ["x"], cost=1))
        res = Simulator(g, two_device_cluster(bandwidth=1e9)).run(np.array([A, B, B, A, A]))
        assert g.topo_rank[3] < g.topo_rank[4]
        assert res.start[4] == 5.0  # z
        assert res.start[3] == 6.0  # w
        assert res.step_time == 7.0

    def test_ties_go_to_topological_order(self):
        """Two sources ready at 0: file order decides."""
        g = graph(op("second", cost=1), op("first", cost=1), name="ties")
        res = Simulator(g, two_device_cluster()).run(np.array([A, A]))
        assert list(res.start) == [0.0, 1.0]


class TestMemory:
    def test_live_tensors_and_weights(self):
        """a(10 B) -> b(20 B) -> c(5 B): peak is a and b both live, plus weights."""
        g = graph(op("a", out=10, params=100), op("b", ["a"], out=20), op("c", ["b"], out=5))
        res = Simulator(g, two_device_cluster()).run(np.array([A, A, A]))
        assert res.peak_memory[A] == 130.0
        assert res.peak_memory[B] == 0.0

    def test_received_copy_counts_on_the_receiver(self):
        g = graph(op("a", out=64), op("b", ["a"], out=8))
        res = Simulator(g, two_device_cluster()).run(np.array([A, B]))
        assert res.peak_memory[A] == 64.0
        assert res.peak_memory[B] == 72.0

    def test_zero_time_ops_still_run_one_after_another(self):
        """Two zero-cost sources on one device: the first's output is gone before the second's exists."""
        g = graph(op("a", cost=0, out=1000), op("b", cost=0, out=1000))
        res = Simulator(g, two_device_cluster()).run(np.array([A, A]))
        assert res.peak_memory[A] == 1000.0

    def test_a_queued_transfer_allocates_when_it_starts(self):
        """q2's copy on B exists from its send's start (3), after q1's copy was read and freed (3)."""
        g = graph(op("p", cost=1), op("q1", ["p"], cost=1, out=1e9), op("q2", ["p"], cost=1, out=1e9),
                  op("r1", ["q1"], cost=0.5), op("r2", ["q2"], cost=0.5))
        # q1 1-2 send 2-3, q2 2-3 send 3-4: r1 3-3.5 frees q1's copy at 3.5; q2's copy lands from 3
        res = Simulator(g, two_device_cluster(bandwidth=1e9)).run(np.array([A, A, A, B, B]))
        assert res.peak_memory[B] == 2e9
        assert res.peak_memory[A] == 2e9

    def test_over_memory_is_oom_and_still_timed(self):
        g = graph(op("a", params=600, cost=1), op("b", ["a"], params=600, cost=1))
        sim = Simulator(g, two_device_cluster(memory=1000))
        whole = sim.run(np.array([A, A]))
        split = sim.run(np.array([A, B]))
        assert whole.oom and whole.step_time == 2.0
        assert not split.oom


class TestLowerBound:
    def test_critical_path_dominates_a_chain(self):
        g = graph(op("a", cost=1), op("b", ["a"], cost=2), op("c", ["b"], cost=3))
        assert Simulator(g, two_device_cluster()).lower_bound == 6.0

    def test_work_over_devices_dominates_wide_graphs(self):
        g = graph(*[op(f"o{i}", cost=1) for i in range(6)])
        assert Simulator(g, two_device_cluster()).lower_bound == 3.0

    def test_uses_each_ops_fastest_device(self):
        from placer.graph import Op, OpGraph

        g = OpGraph("k", [Op("a", "T", cost={"gpu": 1, "cpu": 5}), Op("b", "T", ["a"], cost={"gpu": 4, "cpu": 2})])
        sim = Simulator(g, two_device_cluster(kinds=("gpu", "cpu")))
        assert sim.lower_bound == 3.0


class TestPlacements:
    def test_evaluate_fills_the_contract(self):
        g = graph(op("a", out=8), op("b", ["a"]))
        cluster = two_device_cluster()
        p = Simulator(g, cluster).evaluate(Placement("g", "pair", "user", {"a": "A", "b": "B"}))
        assert p.step_time == pytest.approx(2.0 + 8 / 1e9)
        assert set(p.peak_memory) == {"A", "B"} and p.oom is False and p.lower_bound == 2.0

    def test_evaluate_returns_a_new_placement(self):
        """The placement given is left as it was: evaluation answers with a new one."""
        g = graph(op("a", out=8), op("b", ["a"]))
        given = Placement("", "", "user", {"a": "A", "b": "B"}, meta={"note": 1})
        p = Simulator(g, two_device_cluster()).evaluate(given)
        assert p is not given and p.meta is not given.meta and p.devices is not given.devices
        assert given == Placement("", "", "user", {"a": "A", "b": "B"}, meta={"note": 1})
        assert (p.graph, p.method, p.meta) == ("g", "user", {"note": 1})

    def test_unknown_device_is_an_error(self):
        g = graph(op("a"))
        with pytest.raises(PlacementError, match="'/device:GPU:7'"):
            Placement("g", "pair", "user", {"a": "/device:GPU:7"}).assignment(g, two_device_cluster())

    def test_missing_op_is_an_error(self):
        g = graph(op("a"), op("b"))
        with pytest.raises(PlacementError, match="no device for op 'b'"):
            Placement("g", "pair", "user", {"a": "A"}).assignment(g, two_device_cluster())

    def test_foreign_op_is_an_error(self):
        g = graph(op("a"))
        with pytest.raises(PlacementError, match="'zz'"):
            Placement("g", "pair", "user", {"a": "A", "zz": "A"}).assignment(g, two_device_cluster())

    def test_assignment_out_of_range(self):
        g = graph(op("a"))
        with pytest.raises(PlacementError):
            Simulator(g, two_device_cluster()).run(np.array([2]))
        with pytest.raises(PlacementError):
            Simulator(g, two_device_cluster()).run(np.array([0, 0]))


class TestOverflow:
    @pytest.mark.parametrize("bandwidth, latency", [(1e-300, 0.0), (1e9, 1e308)])
    def test_a_step_no_float_holds_is_an_error(self, bandwidth, latency):
        """A step that could overflow to Infinity is refused, not answered as step time inf (JSON null)."""
        g = graph(op("a", out=1e9), op("b", ["a"], out=1e9), op("c", ["a", "b"]))
        with pytest.raises(PlacerError, match="graph 'g' on cluster 'pair': a step could take longer than a float"):
            Simulator(g, two_device_cluster(bandwidth=bandwidth, latency=latency))

    def test_extreme_but_finite_is_simulated(self):
        g = graph(op("a", cost=1e300, out=8), op("b", ["a"], cost=1e300))
        assert Simulator(g, two_device_cluster()).run(np.array([0, 1])).step_time == pytest.approx(2e300)


class TestOpTimes:
    def test_roofline_when_no_cost_is_given(self):
        """max(flops / peak, bytes read + written / bandwidth) + overhead, per op."""
        from placer.cluster import Cluster, Device
        from placer.graph import Op, OpGraph

        c = Cluster("one", [Device("G", "gpu", peak_flops=1e12, memory_bandwidth=1e11, memory_bytes=1e12,
                                   op_overhead=1e-6)])
        g = OpGraph("g", [Op("x", "T", output_bytes=4e9, flops=1e9),  # memory-bound: 4e9 / 1e11
                          Op("y", "T", ["x"], output_bytes=1e9, flops=1e13)])  # compute-bound: 1e13 / 1e12
        np.testing.assert_allclose(Simulator(g, c).times[:, 0], [0.04 + 1e-6, 10.0 + 1e-6])

    def test_cost_kind_matches_the_cluster_whatever_the_case(self):
        """A cluster file's kind "GPU" is parsed as "gpu"; an op's cost {"GPU": 1.0} must still apply (not 0 s)."""
        from placer.cluster import Cluster
        from placer.graph import OpGraph

        c = Cluster.from_dict({"name": "u", "devices": [
            {"name": "G", "kind": "GPU", "peak_flops": 1e12, "memory_bandwidth": 1e11, "memory_bytes": 1e9}]})
        g = OpGraph.from_dict({"name": "g", "nodes": [{"name": "x", "op": "T", "cost": {"GPU": 1.0}},
                                                      {"name": "y", "op": "T", "inputs": ["x"], "cost": {"Gpu": 2.0}}]})
        assert Simulator(g, c).run(np.array([0, 0])).step_time == 3.0
