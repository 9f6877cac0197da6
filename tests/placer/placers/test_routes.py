"""`placer.placers.routes`: transfers as list schedulers book them, and parts given to devices by shared links."""

import numpy as np
import pytest

from placer.cluster import Cluster, Link
from placer.graph import Op, OpGraph
from placer.placers.common import Problem
from placer.placers.routes import GapBook, Transfers, book_interval, earliest_slot, route_mapping
from placer.simulator.transfer import LinkBook
from tests.placer.helpers import GB, devices, host_with_switch, two_switches


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


    def test_a_row_of_ready_times_is_each_devices_ready_time(self):
        """`ready_row` plans every device in one pass: the same floats as `ready_time` device by device,
        before and after a booking, with sends that wait for each other on a shared uplink."""
        for cluster in (host_with_switch(), two_switches()):
            transfers = self.two_senders(cluster)
            every = np.arange(len(cluster))
            assert transfers.ready_row(2, every) == [transfers.ready_time(2, d)[0] for d in every.tolist()]
            transfers.ready_time(2, 0, commit=True)
            assert transfers.ready_row(2, every) == [transfers.ready_time(2, d)[0] for d in every.tolist()]

    @pytest.mark.parametrize("preset", ["4gpu", "2x-dgx-a100", "4gpu-flat"])
    def test_a_row_stays_each_devices_ready_time_as_a_schedule_books_its_sends(self, preset):
        """The compiled row reads mirrors of the booked sends and link times: equal to `ready_time` for
        every op about to be placed, while a random schedule commits op after op (profiled transfer times
        on some ops, several inputs per op, some on the device itself)."""
        from placer import presets
        from placer.synthetic import layered_graph

        cluster = presets.get(preset)
        graph = layered_graph(120, seed=5)
        problem = Problem.build(graph, cluster)
        problem.xfer[::7] = 1e-4  # a few profiled transfer times
        n, rng = len(graph), np.random.default_rng(1)
        assignment, finish = np.full(n, -1, dtype=np.int64), np.full(n, np.nan)
        transfers = Transfers(problem, assignment, finish)
        every = np.arange(len(cluster))
        for j in graph.topo_order.tolist():
            assert transfers.ready_row(j, every) == [transfers.ready_time(j, d)[0] for d in every.tolist()]
            d = int(rng.integers(len(cluster)))
            arrival, _ = transfers.ready_time(j, d, commit=True)
            assignment[j], finish[j] = d, arrival + problem.times[j, d]

class TestRouteMapping:
    """Partitioners' parts swap alike devices so that the parts that talk do not share a switch uplink."""

    @staticmethod
    def talkers():
        """a sends 1 GB to b; c and d talk to nobody."""
        return OpGraph("g", [Op("a", "X", output_bytes=GB), Op("b", "X", ["a"]), Op("c", "X"), Op("d", "X")])

    def test_parts_that_talk_end_behind_one_switch(self):
        problem = Problem.build(self.talkers(), two_switches())
        unit_device = np.empty(problem.num_units, dtype=np.int64)
        for name, d in zip("abcd", (0, 2, 1, 3)):  # a and b across the uplinks
            unit_device[problem.unit[problem.graph.index[name]]] = d
        perm = route_mapping(problem, unit_device, problem.candidates)
        a, b = (int(perm[unit_device[problem.unit[problem.graph.index[n]]]]) for n in "ab")
        assert {a, b} in ({0, 1}, {2, 3})
        assert sorted(perm.tolist()) == [0, 1, 2, 3]

    def test_no_swap_when_none_helps_or_on_the_flat_model(self):
        problem = Problem.build(self.talkers(), two_switches())
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


def test_booked_intervals_that_touch_merge_and_every_gap_search_answers_the_same():
    """A link busy back to back is kept as one interval; the earliest gap for any positive hold, from any
    time, is the one the unmerged intervals give."""
    rng = np.random.default_rng(0)
    for _ in range(20):
        merged: tuple[list[float], list[float]] = ([], [])
        plain: tuple[list[float], list[float]] = ([], [])
        for _ in range(60):
            ready = float(rng.choice([0.0, 1.0, 2.5, rng.uniform(0, 40)]))
            hold = float(rng.choice([0.5, 1.0, 1.5, rng.uniform(0.1, 3)]))
            t, k = earliest_slot(*plain, ready, hold)
            assert earliest_slot(*merged, ready, hold)[0] == t
            plain[0].insert(k, t)
            plain[1].insert(k, t + hold)
            book_interval(*merged, t, t + hold)
        assert len(merged[0]) < len(plain[0])
        assert all(e < s for e, s in zip(merged[1], merged[0][1:]))  # disjoint, none touching
        for ready in rng.uniform(0, 60, 50):
            for hold in (0.25, 1.0, 2.0, 5.0):
                assert earliest_slot(*merged, float(ready), hold)[0] == earliest_slot(*plain, float(ready), hold)[0]
