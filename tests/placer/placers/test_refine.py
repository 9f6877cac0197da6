"""Local search over group moves: never slower, honours colocation and memory, stops at a local optimum."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from placer import presets
from placer.errors import PlacerError
from placer.graph import Op, OpGraph
from placer.placement import Placement, Provenance
from placer.placers import registry
from placer.placers.refine import drawn_worlds, descend, refine
from placer.grouping import group_graph
from placer.simulator import Simulator
from placer.synthetic import layered_graph
from tests.placer.helpers import graph, op, two_device_cluster


@pytest.mark.parametrize("method", ["single", "round_robin", "heft", "metis"])
def test_a_refined_placement_is_never_slower_than_its_start(method):
    g, c = layered_graph(300, seed=1), presets.get("4gpu")
    start = registry.place(method, g, c)
    better = refine(g, c, start, seconds=math.inf, max_sweeps=20)
    assert better.step_time <= start.step_time
    assert not better.oom
    assert better.method == method and better.meta["refined"]["start_step_time"] == pytest.approx(start.step_time)


def test_round_robin_gets_faster():
    """Dealing ops over GPUs in turn sends most tensors across links; moving groups home saves that."""
    g, c = layered_graph(300, seed=2), presets.get("4gpu")
    start = registry.place("round_robin", g, c)
    better = refine(g, c, start, seconds=math.inf, max_sweeps=10)
    assert better.step_time < 0.9 * start.step_time
    assert better.meta["refined"]["moves"] >= better.meta["refined"]["sweeps"] >= 1


def test_it_stops_at_a_local_optimum_no_single_move_improves():
    g, c = layered_graph(120, seed=3), presets.get("2gpu")
    sim = Simulator(g, c)
    grouping = group_graph(g, c, 16, sim.times)
    start = registry.place("round_robin", g, c).assignment(g, c)
    found = descend(sim, grouping.group_of_op, start, seconds=math.inf)
    assert found.local_optimum and found.step_time <= found.start_step_time
    for group in range(grouping.num_groups):
        for device in range(len(c)):
            moved = found.assignment.copy()
            moved[grouping.group_of_op == group] = device
            assert sim.run(moved).step_time >= found.step_time * (1 - 1e-9)
    again = descend(sim, grouping.group_of_op, found.assignment, seconds=math.inf)
    assert again.moves == 0 and again.local_optimum
    np.testing.assert_array_equal(again.assignment, found.assignment)


def test_a_sweep_limit_makes_it_repeatable():
    g, c = layered_graph(200, seed=4), presets.get("4gpu")
    start = registry.place("round_robin", g, c)
    a = refine(g, c, start, seconds=math.inf, max_sweeps=2)
    b = refine(g, c, start, seconds=math.inf, max_sweeps=2)
    assert a.devices == b.devices and a.meta["refined"]["sweeps"] == 2


def test_colocated_ops_stay_together():
    ops = [Op(**{**o.to_dict(), "colocation": f"set{i % 7}" if i % 3 == 0 else None})
           for i, o in enumerate(layered_graph(150, seed=5).ops)]
    g, c = OpGraph("coloc", ops), presets.get("4gpu")
    start = registry.place("round_robin", g, c)
    better = refine(g, c, start, seconds=math.inf, max_sweeps=10)
    for members in g.colocation_groups().values():
        assert len({better.devices[g.ops[i].name] for i in members}) == 1


def test_a_placement_out_of_memory_is_moved_until_it_fits():
    """Two 6-unit weights on one 10-unit device overflow; one move puts them on different devices."""
    g = graph(op("a", params=6.0), op("b", ["a"], params=6.0), op("c", ["b"]))
    c = two_device_cluster(memory=10.0)
    sim = Simulator(g, c)
    start = np.zeros(3, dtype=np.int64)
    assert sim.run(start).oom
    found = descend(sim, np.arange(3), start, seconds=math.inf)
    assert found.overflow_bytes == 0 and not sim.run(found.assignment).oom


def test_tensors_too_big_for_the_groups_asked_are_refined_on_more():
    """Three 4-unit weights on 10-unit devices cannot share groups: refined from one group asked, on three."""
    g = graph(op("a", params=4.0), op("b", ["a"], params=4.0), op("c", ["b"], params=4.0))
    c = two_device_cluster(memory=10.0)
    start = Simulator(g, c).evaluate(Placement.from_assignment(g, c, np.zeros(3, dtype=np.int64), "single"))
    refined = refine(g, c, start, seconds=5.0, groups=1)
    assert refined.meta["refined"]["groups"] == [3] and not refined.oom


def test_meta_of_the_start_is_kept():
    g, c = layered_graph(80, seed=6), presets.get("2gpu")
    start = registry.place("heft", g, c)
    start.meta["note"] = "kept"
    better = refine(g, c, start, seconds=math.inf, max_sweeps=1)
    assert better.meta["note"] == "kept"
    assert set(better.meta["refined"]) == {"start_step_time", "moves", "sweeps", "local_optimum", "groups",
                                           "worlds", "seconds"}
    assert "refined" not in start.meta  # the start is left as it was


def test_provenance_says_it_was_searched_and_the_method_stays():
    """The refined placement is still its method's (the contract's method unchanged); its provenance adds the
    search, and a chosen placement stays chosen."""
    g, c = layered_graph(80, seed=6), presets.get("2gpu")
    start = replace(registry.place("heft", g, c), provenance=Provenance(chosen_by="best"))
    better = refine(g, c, start, seconds=math.inf, max_sweeps=1)
    assert better.provenance == Provenance(chosen_by="best", refined_by=("search",))
    assert start.provenance == Provenance(chosen_by="best")
    assert better.to_dict()["method"] == "best:heft" and better.method == "heft"


@pytest.mark.parametrize("kwargs, message", [
    ({"seconds": 0.0}, "seconds must be positive"),
    ({"seconds": -1.0}, "seconds must be positive"),
    ({"seconds": float("nan")}, "seconds must be positive"),
    ({"seconds": 1.0, "max_sweeps": 0}, "max_sweeps must be at least 1"),
    ({"seconds": 1.0, "groups": 0}, "groups must be a positive integer"),
    ({"seconds": 1.0, "worlds": -1}, "worlds must be a non-negative integer"),
    ({"seconds": 1.0, "worlds": 1.5}, "worlds must be a non-negative integer"),
])
def test_bad_limits_are_refused(kwargs, message):
    g, c = layered_graph(40, seed=7), presets.get("2gpu")
    with pytest.raises(PlacerError, match=message):
        refine(g, c, registry.place("single", g, c), **kwargs)


def test_a_placement_of_another_graph_is_refused():
    g, c = layered_graph(40, seed=8), presets.get("2gpu")
    other = Placement("other", "2gpu", "single", {"x": "/device:GPU:0"})
    with pytest.raises(PlacerError):
        refine(g, c, other, seconds=1.0)


def test_with_time_left_it_refines_down_to_single_ops():
    """Coarse to fine: each local optimum is refined with groups half the size, down to one op per group."""
    g, c = layered_graph(60, seed=9), presets.get("2gpu")
    start = registry.place("round_robin", g, c)
    better = refine(g, c, start, seconds=math.inf, groups=16, worlds=0)
    levels = better.meta["refined"]["groups"]
    assert levels[0] <= 16 and levels == sorted(levels) and levels[-1] == len(g)
    assert better.meta["refined"]["local_optimum"]
    sim = Simulator(g, c)
    a = better.assignment(g, c)
    for i in range(len(g)):
        for device in range(len(c)):
            moved = a.copy()
            moved[i] = device
            assert sim.run(moved).step_time >= better.step_time * (1 - 1e-9)


def _drawn(g, c, n):
    sim = Simulator(g, c)
    return [sim] + drawn_worlds(g, c, sim.times, n)


@pytest.mark.parametrize("seed", [10, 11])
def test_a_search_in_drawn_worlds_is_slower_in_none_of_them(seed):
    """Every move it takes lowers the worst, over the nominal and the drawn worlds, of its step time over the
    start's there, which starts at 1: so the result is faster than the start in every one of them."""
    g, c = layered_graph(200, seed=seed), presets.get("4gpu")
    start = registry.place("round_robin", g, c)
    better = refine(g, c, start, seconds=math.inf, max_sweeps=6, worlds=3)
    assert better.meta["refined"]["worlds"] == 3 and better.meta["refined"]["moves"] >= 1
    a, b = start.assignment(g, c), better.assignment(g, c)
    for sim in _drawn(g, c, 3):
        assert sim.run(b).step_time < sim.run(a).step_time


def test_in_drawn_worlds_it_stops_where_no_move_is_faster_in_all_of_them():
    g, c = layered_graph(50, seed=12), presets.get("2gpu")
    start = registry.place("round_robin", g, c)
    better = refine(g, c, start, seconds=math.inf, groups=8, worlds=2)
    assert better.meta["refined"]["local_optimum"] and better.meta["refined"]["groups"][-1] == len(g)
    sims = _drawn(g, c, 2)
    a = better.assignment(g, c)
    at = [s.run(a).step_time for s in sims]
    for i in range(len(g)):
        for device in range(len(c)):
            moved = a.copy()
            moved[i] = device
            assert not all(s.run(moved).step_time < t * (1 - 1e-6) for s, t in zip(sims, at))


def test_the_drawn_worlds_make_the_worst_of_them_lower_than_the_nominal_search_does():
    """Not every nominal gain holds in other worlds: the search judged in them ends with a lower worst ratio
    to the start across them (the nominal world included) than the search in the nominal world alone."""
    g, c = layered_graph(200, seed=13), presets.get("4gpu")
    start = registry.place("round_robin", g, c)
    nominal = refine(g, c, start, seconds=math.inf, max_sweeps=6, worlds=0)
    robust = refine(g, c, start, seconds=math.inf, max_sweeps=6, worlds=3)
    assert nominal.step_time <= start.step_time and robust.step_time <= start.step_time
    sims, a = _drawn(g, c, 3), start.assignment(g, c)

    def worst(p):
        return max(s.run(p.assignment(g, c)).step_time / s.run(a).step_time for s in sims)

    assert worst(robust) < worst(nominal)
