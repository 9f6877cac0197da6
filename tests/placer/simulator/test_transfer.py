"""The link-cost formula (`placer.simulator.transfer`), written once for every kernel."""

import numpy as np

from placer.simulator.transfer import link_time, transfer_time

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
