"""Colocation units, the memory ledger, the memory repair pass and the list schedulers' transfers."""

import numpy as np

from placer.cluster import Cluster, Device, Link
from placer.graph import Op, OpGraph
from placer.placers.common import (GapBook, MemoryLedger, Problem, Transfers, colocation_units, fit_to_memory,
                                   route_mapping)
from placer.simulator.transfer import LinkBook
from placer.topology import Switch, TopoLink, Topology
from tests.placer.helpers import GB, devices, host_with_switch


def cluster(memory=10.0, kinds=("gpu", "gpu")):
    return Cluster("c", [Device(f"D{i}", k, 1e12, 1e12, memory) for i, k in enumerate(kinds)],
                   default_link=Link(1.0, 0.0))


def test_units_group_colocated_ops_and_follow_topological_order():
    g = OpGraph("g", [Op("v", "Var", colocation="k"), Op("a", "X", ["v"]), Op("u", "Upd", ["a"], colocation="k"),
                      Op("b", "X", ["a"])])
    unit = colocation_units(g)
    assert unit[g.index["v"]] == unit[g.index["u"]] == 0
    assert sorted(set(unit.tolist())) == [0, 1, 2]


def test_unit_memory_is_weights_plus_outputs():
    g = OpGraph("g", [Op("v", "Var", param_bytes=3, output_bytes=1, colocation="k"),
                      Op("u", "Upd", ["v"], output_bytes=2, colocation="k")])
    p = Problem.build(g, cluster())
    assert p.unit_memory.tolist() == [6.0]


def test_candidates_are_the_gpus_or_every_device():
    g = OpGraph("g", [Op("a", "X")])
    assert Problem.build(g, cluster(kinds=("cpu", "gpu"))).candidates.tolist() == [1]
    assert Problem.build(g, cluster(kinds=("cpu", "cpu"))).candidates.tolist() == [0, 1]


def test_ledger_falls_back_to_the_roomiest_device_and_says_so():
    g = OpGraph("g", [Op("a", "X", param_bytes=20)])
    p = Problem.build(g, cluster(memory=10))
    ledger = MemoryLedger(p)
    assert ledger.feasible(0, np.array([0, 1])).size == 0
    assert ledger.choose(0, np.array([0, 1])).tolist() == [0]
    assert ledger.exceeded


def test_fit_to_memory_moves_the_last_units_off_a_full_device():
    g = OpGraph("g", [Op(f"o{k}", "X", [f"o{k - 1}"] if k else [], param_bytes=4) for k in range(4)])
    p = Problem.build(g, cluster(memory=10))
    unit_device, ledger = fit_to_memory(p, np.zeros(4, dtype=np.int64), p.candidates)
    assert unit_device.tolist() == [0, 0, 1, 1]
    assert not ledger.exceeded


def test_gradient_ops_join_their_forward_op():
    """Exact forward op first, else the first forward op of the deepest shared scope."""
    from placer.placers.common import forward_units

    g = OpGraph("g", [
        Op("net/conv1/Conv2D", "Conv2D"), Op("net/conv1/Relu", "Relu", ["net/conv1/Conv2D"]),
        Op("loss", "Mean", ["net/conv1/Relu"]),
        Op("gradient_tape/net/conv1/Relu/ReluGrad", "ReluGrad", ["loss"]),
        Op("gradient_tape/net/conv1/Reshape", "Reshape", ["gradient_tape/net/conv1/Relu/ReluGrad"]),
        Op("gradient_tape/Mean/Tile", "Tile", ["loss"]),
    ])
    unit = forward_units(g, colocation_units(g), np.zeros(len(g)), 1.0)
    ix = g.index
    assert unit[ix["gradient_tape/net/conv1/Relu/ReluGrad"]] == unit[ix["net/conv1/Relu"]]
    assert unit[ix["gradient_tape/net/conv1/Reshape"]] == unit[ix["net/conv1/Conv2D"]]
    assert unit[ix["gradient_tape/Mean/Tile"]] != unit[ix["loss"]]  # one-level scopes are not matched


class TestTransfers:
    """What a list scheduler sees of transfers: the simulator's routes, shared link directions, FIFO."""

    @staticmethod
    def two_senders(c):
        g = OpGraph("g", [Op("a", "X", output_bytes=GB), Op("b", "X", output_bytes=GB), Op("c", "X", ["a", "b"])])
        problem = Problem.build(g, c)
        assignment = np.array([1, 2, -1])
        return Transfers(problem, assignment, np.array([1.0, 1.0, 0.0]))

    def test_two_gpus_behind_one_switch_sending_to_the_host_at_once_wait_for_each_other(self):
        """g0 and g1 share their switch's uplink: the second 1 GB copy waits for the first (1-2, then 2-3)."""
        transfers = self.two_senders(host_with_switch())
        assert transfers.ready_time(2, 0)[0] == 3.0
        assert transfers.ready_time(2, 0, commit=True)[0] == 3.0
        assert transfers.arrived == {(0, 0): 2.0, (1, 0): 3.0}

    def test_on_the_flat_model_they_do_not(self):
        transfers = self.two_senders(Cluster("flat", devices("cpu", "g0", "g1", "g2"), default_link=Link(GB, 0.0)))
        assert transfers.ready_time(2, 0, commit=True)[0] == 2.0

    def test_an_output_crosses_to_a_device_once(self):
        transfers = self.two_senders(host_with_switch())
        transfers.ready_time(2, 0, commit=True)
        before = list(transfers.book.free)
        assert transfers.ready_time(2, 0, commit=True)[0] == 3.0
        assert transfers.book.free == before

    def test_a_booking_names_every_device_whose_routes_got_busier(self):
        """Booking g0 -> host and g1 -> host fills their uplink and the host's memory link, which g2's sends
        to the host use too: sends from all three GPUs may now start later, the host's own are untouched."""
        transfers = self.two_senders(host_with_switch())
        assert transfers.ready_time(2, 0)[1] == set()
        assert transfers.ready_time(2, 0, commit=True)[1] == {1, 2, 3}


class TestRouteMapping:
    """Partitioners' parts swap alike devices so that the parts that talk do not share a switch uplink."""

    @staticmethod
    def two_switches():
        """g0, g1 behind sw0 and g2, g3 behind sw1, the switches' uplinks 10x slower than the GPU ports."""
        links = [TopoLink("sw0", "sock", GB), TopoLink("sw1", "sock", GB)] + [
            TopoLink(f"g{i}", f"sw{i // 2}", 10 * GB) for i in range(4)]
        return Cluster("two", devices("g0", "g1", "g2", "g3"), topology=Topology(
            [Switch("sock", "cpu-socket"), Switch("sw0", "pcie-switch"), Switch("sw1", "pcie-switch")], links))

    @staticmethod
    def talkers():
        """a sends 1 GB to b; c and d talk to nobody."""
        return OpGraph("g", [Op("a", "X", output_bytes=GB), Op("b", "X", ["a"]), Op("c", "X"), Op("d", "X")])

    def test_parts_that_talk_end_behind_one_switch(self):
        problem = Problem.build(self.talkers(), self.two_switches())
        unit_device = np.empty(problem.num_units, dtype=np.int64)
        for name, d in zip("abcd", (0, 2, 1, 3)):  # a and b across the uplinks
            unit_device[problem.unit[problem.graph.index[name]]] = d
        perm = route_mapping(problem, unit_device, problem.candidates)
        a, b = (int(perm[unit_device[problem.unit[problem.graph.index[n]]]]) for n in "ab")
        assert {a, b} in ({0, 1}, {2, 3})
        assert sorted(perm.tolist()) == [0, 1, 2, 3]

    def test_no_swap_when_none_helps_or_on_the_flat_model(self):
        problem = Problem.build(self.talkers(), self.two_switches())
        unit_device = np.empty(problem.num_units, dtype=np.int64)
        for name, d in zip("abcd", (0, 1, 2, 3)):
            unit_device[problem.unit[problem.graph.index[name]]] = d
        assert route_mapping(problem, unit_device, problem.candidates).tolist() == [0, 1, 2, 3]
        flat = Problem.build(self.talkers(), Cluster("flat", devices("g0", "g1", "g2", "g3"), default_link=Link(GB, 0)))
        assert route_mapping(flat, np.array([0, 2, 1, 3]), flat.candidates).tolist() == [0, 1, 2, 3]


class TestGapBook:
    """For schedulers that plan out of time order: a transfer takes the earliest idle gap on its route."""

    def test_an_earlier_transfer_planned_later_goes_before(self):
        """g0 -> host booked at 10-11 s; g1 -> host, ready at 0 and planned after it, takes the uplink at 0-1."""
        gaps, fifo = GapBook(host_with_switch().routes(), 4), LinkBook(host_with_switch().routes(), 4)
        for book in (gaps, fifo):
            assert book.send(1, 0, 10.0, GB) == 11.0
        assert gaps.send(2, 0, 0.0, GB) == 1.0
        assert fifo.send(2, 0, 0.0, GB) == 12.0

    def test_a_gap_too_short_on_any_direction_is_skipped(self):
        """The uplink is free 1-2 s but a 1.5 GB copy needs 1.5 s: it goes after the 2-3 s booking."""
        book = GapBook(host_with_switch().routes(), 4)
        book.send(1, 0, 0.0, GB)
        book.send(1, 0, 2.0, GB)
        assert book.send(2, 0, 1.0, 1.5 * GB) == 4.5

    def test_tentative_bookings_count_and_leave_the_book_as_it_was(self):
        book = GapBook(host_with_switch().routes(), 4)
        plan = {}
        assert book.send(1, 0, 0.0, GB, pending=plan) == 1.0
        assert book.send(2, 0, 0.0, GB, pending=plan) == 2.0
        assert all(not s for s in book.starts)
