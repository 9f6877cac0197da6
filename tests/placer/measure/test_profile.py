"""Profiling op times on this CPU and using them in the simulator."""

from __future__ import annotations

import numpy as np
import pytest

from placer import presets
from placer.measure.profile import LOCAL_KIND, profile_ops, with_profile
from placer.simulator import Simulator


@pytest.fixture(scope="module")
def profiled(tiny):
    _, _, graph, graph_def = tiny
    profile = profile_ops(graph, graph_def, runs=3, warmup=1)
    return graph, profile, with_profile(graph, profile)


def test_every_op_gets_a_positive_cost_of_its_own_kind(profiled):
    graph, profile, g = profiled
    untraced = {op.op for op in graph if op.name not in profile.kernel_seconds}
    assert untraced == {"Placeholder"}  # inputs and variables are recreated, the placeholders never run
    costs = [op.cost[LOCAL_KIND] for op in g if op.op != "Placeholder"]
    assert all(c > 0 for c in costs)
    assert not any(op.cost for op in graph)  # the original is left alone


def test_costs_sum_to_the_untraced_step(profiled):
    """One thread, one device: the simulated step is the measured one by construction."""
    _, profile, g = profiled
    total = sum(op.cost[LOCAL_KIND] for op in g)
    assert total == pytest.approx(profile.step_seconds, rel=1e-6) or total > profile.step_seconds
    sim = Simulator(g, presets.get("local"))
    assert sim.run(np.zeros(len(g), dtype=np.int64)).step_time == pytest.approx(total)


def test_profiled_costs_do_not_apply_to_other_clusters(profiled):
    _, _, g = profiled
    sim = Simulator(g, presets.get("2gpu"))
    cpu = [d.name for d in sim.cluster.devices].index("/device:CPU:0")
    assert not np.allclose(sim.times[:, cpu], [op.cost[LOCAL_KIND] for op in g])


def test_pooled_costs_are_the_one_thread_costs_scaled(tiny):
    """With `pool`, the step on TF's default pool is timed too, and costs are scaled by its ratio."""
    _, _, graph, graph_def = tiny
    profile = profile_ops(graph, graph_def, runs=2, warmup=1, pool=True)
    assert profile.pool_ratio is not None and profile.pool_ratio > 0
    assert np.allclose(profile.op_seconds(graph, pool=True), profile.pool_ratio * profile.op_seconds(graph))
    assert profile_ops(graph, graph_def, runs=1, warmup=0).pool_ratio is None
