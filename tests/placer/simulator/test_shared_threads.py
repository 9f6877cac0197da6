"""Clusters whose devices share one thread pool (logical CPU devices of one TensorFlow process)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from placer.cluster import Cluster
from placer.errors import ClusterError
from placer.simulator import Simulator
from placer.simulator.reference import simulate_reference
from tests.placer.helpers import graph, op, two_device_cluster
from tests.placer.simulator.test_properties import graphs_and_placements


def shared(cluster: Cluster, threads: int) -> Cluster:
    return dataclasses.replace(cluster, shared_threads=threads)


class TestHandComputed:
    def test_one_thread_serialises_two_devices(self):
        """Two independent 1 s ops on two devices: 1 s apart, 2 s on one shared thread."""
        g = graph(op("a", cost=1.0), op("b", cost=1.0))
        a = np.array([0, 1])
        assert Simulator(g, two_device_cluster()).run(a).step_time == 1.0
        assert Simulator(g, shared(two_device_cluster(), 1)).run(a).step_time == 2.0

    def test_two_threads_let_one_device_run_two_ops(self):
        g = graph(op("a", cost=1.0), op("b", cost=1.0), op("c", ["a", "b"], cost=0.5))
        one_device = np.array([0, 0, 0])
        assert Simulator(g, two_device_cluster()).run(one_device).step_time == 2.5
        assert Simulator(g, shared(two_device_cluster(), 2)).run(one_device).step_time == 1.5

    def test_earliest_ready_op_takes_the_free_thread(self):
        """One thread: a runs 0-1; then b (ready since 0) goes before c (ready at 1): 1-4, and c 4-5."""
        g = graph(op("a", cost=1.0), op("b", cost=3.0), op("c", ["a"], cost=1.0))
        res = Simulator(g, shared(two_device_cluster(), 1)).run(np.array([0, 1, 0]))
        assert list(res.start) == [0.0, 1.0, 4.0] and res.step_time == 5.0

    def test_a_crossing_is_work_of_the_sending_thread(self):
        """a (1 s) feeds b on the other device: the hand-over (0.25 s + 1 GB at 4 GB/s) lengthens a,
        and occupies the one thread, so the independent c waits for it too."""
        g = graph(op("a", cost=1.0, out=1e9), op("b", ["a"], cost=1.0), op("c", cost=1.0))
        c = shared(two_device_cluster(bandwidth=4e9, latency=0.25), 1)
        res = Simulator(g, c).run(np.array([0, 1, 1]))
        assert list(res.start) == [0.0, 2.5, 1.5] and res.step_time == 3.5
        assert res.finish[0] == 1.5 and res.transfer_end[0, 1] == 1.5

    def test_one_send_per_device_however_many_readers(self):
        g = graph(op("a", cost=1.0), op("b", ["a"], cost=1.0), op("c", ["a"], cost=1.0))
        c = shared(two_device_cluster(bandwidth=1e9, latency=0.5), 2)
        assert Simulator(g, c).run(np.array([0, 1, 1])).finish[0] == 1.5

    def test_lower_bound_divides_by_threads(self):
        g = graph(op("a", cost=1.0), op("b", cost=1.0), op("c", cost=1.0), op("d", cost=1.0))
        assert Simulator(g, shared(two_device_cluster(), 1)).lower_bound == 4.0
        assert Simulator(g, two_device_cluster()).lower_bound == 2.0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs_and_placements())
def test_kernel_matches_reference_with_a_shared_pool(case):
    from placer import presets

    g, a = case
    for threads in (1, 2, 3):
        sim = Simulator(g, shared(presets.get("4gpu"), threads))
        res = sim.run(a)
        step, busy, peak, moved = simulate_reference(sim, a)
        assert res.step_time == pytest.approx(step, rel=1e-12, abs=1e-15)
        np.testing.assert_allclose(res.busy, busy, rtol=1e-12)
        if all(op.cost["gpu"] > 0 for op in g):  # zero-time ops: see test_properties' memory test
            np.testing.assert_allclose(res.peak_memory, peak, rtol=1e-12)
        assert res.bytes_moved == moved
        batch = sim.run_batch(np.stack([a, a]))
        assert batch.step_time[0] == res.step_time


class TestClusterField:
    def test_round_trip(self):
        c = shared(two_device_cluster(), 2)
        back = Cluster.from_dict(c.to_dict())
        assert back.shared_threads == 2
        assert "shared_threads" not in two_device_cluster().to_dict()

    @pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
    def test_bad_value(self, bad):
        d = two_device_cluster().to_dict()
        d["shared_threads"] = bad
        with pytest.raises(ClusterError, match="shared_threads"):
            Cluster.from_dict(d)


class TestHugePool:
    @pytest.mark.parametrize("threads", [2**40, 10**30])
    def test_more_threads_than_ops_is_as_many_as_ops(self, threads):
        """A pool larger than the graph runs every ready op at once; the kernel's heaps stay graph-sized
        (2**40 threads raised MemoryError, 10**30 OverflowError)."""
        g = graph(op("a", cost=1.0), op("b", cost=2.0), op("c", ["a", "b"], cost=0.5))
        a = np.array([0, 0, 0])
        expected = Simulator(g, shared(two_device_cluster(), 3)).run(a)
        res = Simulator(g, shared(two_device_cluster(), threads)).run(a)
        assert res.step_time == expected.step_time == 2.5
        assert Simulator(g, shared(two_device_cluster(), threads)).lower_bound == expected.lower_bound
