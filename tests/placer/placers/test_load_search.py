"""Local search on max load: incremental move scores equal full re-evaluation; it only improves."""

from __future__ import annotations

import numpy as np
import pytest

from placer import presets
from placer.cluster import Cluster, Device, Link
from placer.graph import Op, OpGraph
from placer.objectives import ThroughputModel
from placer.placers.common import colocation_units
from placer.placers.load_search import _score_moves, _swaps, _unit_moves, balanced_starts, improve
from placer.synthetic import layered_graph


def _random_case(seed: int):
    rng = np.random.default_rng(seed)
    g = layered_graph(80, seed=seed)
    ops = [Op(**{**op.to_dict(), "transfer_time": float(rng.uniform(0, 1e-3)) if rng.random() < 0.5 else None})
           for op in g.ops]
    return OpGraph("g", ops), presets.get("4gpu")


@pytest.mark.parametrize("seed", range(3))
def test_incremental_scores_match_full_evaluation(seed):
    """Single moves and swaps, scored from what they touch, equal a full pass."""
    g, c = _random_case(seed)
    model = ThroughputModel(g, c)
    rng = np.random.default_rng(seed)
    a = rng.integers(0, len(c), size=len(g))
    unit = np.arange(len(g))
    order = np.argsort(unit)
    bounds = np.arange(len(g) + 1)
    singles = np.stack([rng.integers(0, len(g), 20), rng.integers(0, len(c), 20), -np.ones(20, int),
                        -np.ones(20, int)], axis=1)
    first, second = rng.choice(len(g), size=(2, 20), replace=False)
    swaps = np.stack([first, a[second], second, a[first]], axis=1)
    moves = np.concatenate([singles, swaps])
    out = np.empty((40, len(c)))
    p_off, p_idx = g.predecessors
    _score_moves(a, model.load_batch(a)[0], moves, order, bounds, model.times, model.s_off, model.s_idx, p_off,
                 p_idx, model.xfer_time, model.out_bytes, model.bandwidth, model.latency, model.pays,
                 np.full(len(c), -1), np.full(len(g), -1), out)
    for k, (u, d, u2, d2) in enumerate(moves):
        b = a.copy()
        b[u] = d
        if u2 >= 0:
            b[u2] = d2
        assert out[k] == pytest.approx(model.load_batch(b)[0], rel=1e-9, abs=1e-12)


def test_improve_never_worsens_and_keeps_memory():
    g, c = _random_case(7)
    model = ThroughputModel(g, c)
    unit = colocation_units(g)
    for name, start in balanced_starts(model, unit).items():
        a, value = improve(model, start, unit)
        assert value <= model.max_load(start) + 1e-15, name
        assert value == pytest.approx(model.max_load(a))
        assert model.loads(a).memory_ok


def test_moves_whole_units():
    dev = dict(peak_flops=1e12, memory_bandwidth=1e11, memory_bytes=1e9)
    c = Cluster("c", [Device("A", "gpu", **dev), Device("B", "gpu", **dev)], default_link=Link(1e9, 0.0))
    g = OpGraph("u", [Op("x", "X", [], cost={"gpu": 1.0}, colocation="k"),
                      Op("y", "X", [], cost={"gpu": 1.0}, colocation="k"),
                      Op("z", "X", [], cost={"gpu": 1.0})])
    model = ThroughputModel(g, c)
    a, value = improve(model, np.zeros(3, dtype=np.int64), colocation_units(g))
    assert a[0] == a[1] != a[2] and value == 2.0


def test_iterated_search_is_reproducible_and_never_worse():
    from placer.placers.load_search import iterate

    g, c = _random_case(4)
    model = ThroughputModel(g, c)
    unit = colocation_units(g)
    start = balanced_starts(model, unit)["round_robin"]
    a1, v1 = iterate(model, start, unit, seed=2, kicks=30)
    a2, v2 = iterate(model, start, unit, seed=2, kicks=30)
    assert v1 == v2 and (a1 == a2).all()
    assert v1 <= model.max_load(start)
    assert model.loads(a1).memory_ok


def test_the_work_bound_stops_a_descent():
    """max_moves=1: one move of one unit, or one swap of two; the start is not worse for it."""
    g, c = _random_case(1)
    model = ThroughputModel(g, c)
    unit = colocation_units(g)
    start = balanced_starts(model, unit)["round_robin"]
    a, value = improve(model, start, unit, max_moves=1)
    assert 1 <= len(np.unique(unit[a != start])) <= 2
    assert value < model.max_load(start)


def test_a_passed_deadline_stops_the_search_and_is_marked():
    from placer.placers.load_search import iterate
    from placer.placers.time_cap import Deadline

    g, c = _random_case(2)
    model = ThroughputModel(g, c)
    unit = colocation_units(g)
    start = balanced_starts(model, unit)["round_robin"]
    deadline = Deadline(0.0)
    a, value = improve(model, start, unit, deadline=deadline)
    assert (a == start).all() and value == model.max_load(start) and deadline.hit
    a, value = iterate(model, start, unit, deadline=Deadline(0.0))
    assert (a == start).all()
    untouched = Deadline(1e9)
    improve(model, start, unit, deadline=untouched)
    assert not untouched.hit


@pytest.mark.parametrize("seed", range(5))
def test_candidate_moves_are_every_move_and_swap_that_fits_in_order(seed):
    """The candidates a descent scores: each unit to each other device, each swap, where memory holds them,
    in unit-then-device order (ties between equally good moves go to the first)."""
    rng = np.random.default_rng(seed)
    D, busiest = 4, int(rng.integers(4))
    unit_mem = rng.uniform(0, 2, 12)
    held, memory = rng.uniform(0, 4, D), rng.uniform(3, 6, D)
    unit_device = rng.integers(0, D, 12)
    units = np.flatnonzero(unit_device == busiest)
    others = np.flatnonzero(unit_device != busiest)
    expected = [[u, d, -1, -1] for u in units.tolist() for d in range(D)
                if d != busiest and held[d] + unit_mem[u] <= memory[d]]
    assert _unit_moves(units, busiest, held, unit_mem, memory).tolist() == expected
    expected = [[u, int(unit_device[v]), v, busiest] for u in units.tolist() for v in others.tolist()
                if held[unit_device[v]] - unit_mem[v] + unit_mem[u] <= memory[unit_device[v]]
                and held[busiest] - unit_mem[u] + unit_mem[v] <= memory[busiest]]
    assert _swaps(units, others, busiest, unit_device, held, unit_mem, memory).tolist() == expected
