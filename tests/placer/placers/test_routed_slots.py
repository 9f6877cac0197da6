"""The compiled processor selection on a topology gives the plain-Python reference's schedule, op for op."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placer import presets
from placer.placers.common import LiveMemory, Problem
from placer.placers.cpop import cpop
from placer.placers.heft import ListScheduler, heft
from placer.placers.routed_slots import _Intervals
from placer.synthetic import layered_graph
from tests.placer.simulator.test_properties import graphs_and_placements, topologies


def both(scheduler, problem, offered=None, monkeypatch=None):
    """The schedule compiled and by the reference path."""
    out = []
    for compiled in (True, False):
        monkeypatch.setattr(ListScheduler, "compiled", compiled)
        out.append(scheduler(problem, memory=LiveMemory(problem), offered=offered))
    return out


def assert_same(a, b):
    assert a.assignment.tolist() == b.assignment.tolist()
    assert a.start.tolist() == b.start.tolist()  # the same floats, not close ones
    assert a.finish.tolist() == b.finish.tolist()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(case=graphs_and_placements(max_ops=30, costs=(0.0, 1e-4, 1e-3)), cluster=topologies(),
       seed=st.integers(0, 2**31 - 1))
def test_heft_and_cpop_match_the_reference_on_random_topologies(case, cluster, seed, monkeypatch):
    graph, _ = case
    problem = Problem.build(graph, cluster)
    rng = np.random.default_rng(seed)
    offered = rng.random((len(graph), len(cluster))) < 0.5
    offered[np.arange(len(graph)), rng.integers(0, len(cluster), len(graph))] = True
    for scheduler in (heft, cpop):
        for devices_offered in (None, offered):
            assert_same(*both(scheduler, problem, devices_offered, monkeypatch))


@pytest.mark.parametrize("preset", ["8gpu", "8gpu-nvlink", "2x-dgx-a100"])
def test_heft_and_cpop_match_the_reference_on_presets(preset, monkeypatch):
    """Hundreds of ops and many transfers per link direction: the interval rows grow and merge."""
    graph = layered_graph(600, width=24, seed=3)
    problem = Problem.build(graph, presets.get(preset))
    for scheduler in (heft, cpop):
        a, b = both(scheduler, problem, monkeypatch=monkeypatch)
        assert len(set(a.assignment.tolist())) > 2
        assert_same(a, b)


def test_interval_rows_grow_and_keep_what_they_hold():
    rows = _Intervals(3, 2)
    rows.starts[1, :2], rows.ends[1, :2], rows.count[1] = (1.0, 5.0), (2.0, 6.0), 2
    rows.make_room(3)
    assert rows.starts.shape == (3, 8)
    assert rows.starts[1, :2].tolist() == [1.0, 5.0] and rows.ends[1, :2].tolist() == [2.0, 6.0]
