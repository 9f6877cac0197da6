"""The link-cost formula (`placer.simulator.transfer`), written once for every kernel, and `LinkBook`."""

import numpy as np
import pytest

from placer.cluster import Cluster, Link
from placer.simulator.transfer import LinkBook, link_time, transfer_time
from tests.placer.helpers import GB, devices, host_with_switch

LATENCY = np.array([[0.0, 1e-5], [2e-5, 0.0]])
BANDWIDTH = np.array([[np.inf, 1e9], [5e8, np.inf]])
OUT_BYTES = np.array([1e6, 4e6])


def test_latency_plus_bytes_over_bandwidth_of_the_directed_link():
    xfer = np.array([-1.0, -1.0])
    assert transfer_time(xfer, OUT_BYTES, 1, LATENCY, BANDWIDTH, 0, 1) == 1e-5 + 4e6 / 1e9
    assert transfer_time(xfer, OUT_BYTES, 1, LATENCY, BANDWIDTH, 1, 0) == 2e-5 + 4e6 / 5e8


def test_a_profiled_transfer_time_replaces_the_formula():
    xfer = np.array([0.25, -1.0])
    assert transfer_time(xfer, OUT_BYTES, 0, LATENCY, BANDWIDTH, 0, 1) == 0.25
    assert transfer_time(np.array([0.0, -1.0]), OUT_BYTES, 0, LATENCY, BANDWIDTH, 0, 1) == 0.0


def test_link_time_is_latency_plus_bytes_over_bandwidth():
    assert link_time(1e-5, 4e6, 1e9) == 1e-5 + 4e6 / 1e9


class TestLinkBook:
    """The simulator's transfer rule for schedulers: routes, a free time per link direction, FIFO."""

    def test_two_gpus_behind_one_switch_share_its_uplink(self):
        """g0 and g1 each send 1 GB to the host, both ready at 1 s: the second waits for the uplink."""
        book = LinkBook(host_with_switch().routes(), 4)
        assert book.send(1, 0, 1.0, GB) == 2.0
        assert book.start(2, 0, 1.0) == 2.0
        assert book.send(2, 0, 1.0, GB) == 3.0

    def test_a_fast_link_is_held_at_its_own_pace(self):
        """The host's memory link (1000 GB/s) is busy 1 ms per 1 GB: g2's copy over another switch waits 1 ms."""
        book = LinkBook(host_with_switch().routes(), 4)
        book.send(1, 0, 1.0, GB)
        assert book.send(3, 0, 1.0, GB) == pytest.approx(2.001)

    def test_a_tentative_plan_leaves_the_book_as_it_was(self):
        book = LinkBook(host_with_switch().routes(), 4)
        plan = {}
        assert book.send(1, 0, 1.0, GB, pending=plan) == 2.0
        assert book.send(2, 0, 1.0, GB, pending=plan) == 3.0
        assert book.free == [0.0] * len(book.free)

    def test_a_profiled_time_holds_every_direction_for_that_time(self):
        book = LinkBook(host_with_switch().routes(), 4)
        assert book.send(1, 0, 0.0, GB, profiled=0.5) == 0.5
        assert book.send(2, 0, 0.0, GB) == 1.5

    def test_flat_pairs_never_wait_for_each_other(self):
        """The flat model: each pair its own link, one-hop arithmetic as the simulator's."""
        flat = Cluster("flat", devices("cpu", "g0", "g1"), default_link=Link(GB, 1e-5))
        book = LinkBook(flat.routes(), 3)
        assert book.send(1, 0, 1.0, GB) == 1.0 + (1e-5 + GB / GB)
        assert book.send(2, 0, 1.0, GB) == 1.0 + (1e-5 + GB / GB)
        assert book.send(1, 0, 1.0, GB) == (1.0 + (1e-5 + GB / GB)) + (1e-5 + GB / GB)  # its own link is busy

    def test_senders_over_a_direction(self):
        """The uplink from switch 0 to the socket carries g0's and g1's routes to the host and to g2."""
        c = host_with_switch()
        book = LinkBook(c.routes(), 4)
        uplink = c.compiled.adj["sw0"]["sock"]
        assert book.senders_over[uplink] == [1, 2]
