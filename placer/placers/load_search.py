"""Local search on the throughput objective: move units off the busiest device.

A pipeline split keeps each device's piece contiguous; the objective does not
require it. Starting from any placement, `improve` repeatedly tries every
move of one colocation unit from the busiest device to another device (within
memory), scores all of them at once with the exact model
(`ThroughputModel.load_batch`; on big graphs a bounded set of them, the
busiest device's border first), and takes the best one that lowers the max
load, or keeps it and lowers the sum of squared loads (which breaks ties
between equally busy devices and guarantees termination).
"""

from __future__ import annotations

import time

import numpy as np

from placer.objectives import ThroughputModel


def improve(model: ThroughputModel, assignment: np.ndarray, unit: np.ndarray, *, seed: int = 0,
            max_moves: int = 2000, max_candidates: int = 1024,
            time_limit: float = 20.0) -> tuple[np.ndarray, float]:
    """Steepest descent from `assignment`; returns ``(assignment, max_load)``.

    Parameters
    ----------
    model : the compiled objective.
    assignment : device per op to start from (colocation respected).
    unit : unit id per op; a move carries a whole unit.
    seed : orders ties between equally good moves and samples candidates.
    max_moves, time_limit : stop after this many moves or seconds.
    max_candidates : moves scored per step; past it, the units at the busiest
        device's border (an edge to another device) are all tried and a
        seeded sample of the others fills the rest.
    """
    rng = np.random.default_rng(seed)
    a = np.array(assignment, dtype=np.int64)
    D = model.num_devices
    num_units = int(unit.max()) + 1
    unit_mem = np.bincount(unit, weights=model.params, minlength=num_units)
    unit_device = np.empty(num_units, dtype=np.int64)
    unit_device[unit] = a
    order = np.argsort(unit, kind="stable")
    bounds = np.searchsorted(unit[order], np.arange(num_units + 1))
    held = np.bincount(a, weights=model.params, minlength=D).astype(np.float64)
    loads = model.load_batch(a)[0]
    cur = (loads.max(), float((loads ** 2).sum()))
    p_off, p_idx = model.graph.predecessors
    e_src, e_dst = p_idx, np.repeat(np.arange(len(a)), np.diff(p_off))
    t0 = time.perf_counter()
    for _ in range(max_moves):
        if time.perf_counter() - t0 > time_limit or D < 2:
            break
        busiest = int(np.argmax(loads))
        units = np.flatnonzero(unit_device == busiest)
        if len(units) * (D - 1) > max_candidates:
            cross = a[e_src] != a[e_dst]
            border = np.union1d(unit[e_src[cross]], unit[e_dst[cross]])
            border = border[unit_device[border] == busiest]
            rest = np.setdiff1d(units, border)
            room = max(0, max_candidates // (D - 1) - len(border))
            units = np.concatenate([border, rng.choice(rest, size=min(room, len(rest)), replace=False)])
        moves = [(u, d) for u in units.tolist() for d in range(D)
                 if d != busiest and held[d] + unit_mem[u] <= model.memory_bytes[d]]
        if not moves:
            break
        rng.shuffle(moves)
        batch = np.repeat(a[None, :], len(moves), axis=0)
        for k, (u, d) in enumerate(moves):
            batch[k, order[bounds[u]:bounds[u + 1]]] = d
        cand = model.load_batch(batch)
        peak = cand.max(axis=1)
        sumsq = (cand ** 2).sum(axis=1)
        k = int(np.lexsort((sumsq, peak))[0])
        better = peak[k] < cur[0] * (1 - 1e-12) or (peak[k] <= cur[0] and sumsq[k] < cur[1] * (1 - 1e-12))
        if not better:
            break
        u, d = moves[k]
        held[unit_device[u]] -= unit_mem[u]
        held[d] += unit_mem[u]
        unit_device[u] = d
        a = batch[k].copy()
        loads = cand[k]
        cur = (float(peak[k]), float(sumsq[k]))
    return a, float(loads.max())


def balanced_starts(model: ThroughputModel, unit: np.ndarray) -> dict[str, np.ndarray]:
    """Non-contiguous starting points for `improve`, each within memory when it can be.

    - ``lpt``: units by decreasing compute, each to the accelerator with the
      least compute so far (Graham's longest-processing-time rule; ignores
      communication, which the search then weighs);
    - ``round_robin``: units in graph order dealt over the accelerators.

    Accelerators are the non-CPU devices (all devices if there are none).
    """
    D = model.num_devices
    accel = np.array([i for i, d in enumerate(model.cluster.devices) if d.kind != "cpu"] or list(range(D)))
    num_units = int(unit.max()) + 1
    fastest = model.times[:, accel].min(axis=1)
    unit_time = np.bincount(unit, weights=np.where(np.isfinite(fastest), fastest, 0.0), minlength=num_units)
    unit_mem = np.bincount(unit, weights=model.params, minlength=num_units)
    first = np.full(num_units, len(unit))
    np.minimum.at(first, unit, np.arange(len(unit)))

    def deal(order: np.ndarray, pick) -> np.ndarray:
        held = np.zeros(D)
        busy = np.zeros(D)
        unit_device = np.empty(num_units, dtype=np.int64)
        for k, u in enumerate(order.tolist()):
            room = accel[held[accel] + unit_mem[u] <= model.memory_bytes[accel]]
            d = int(pick(k, room if len(room) else accel, busy))
            unit_device[u] = d
            held[d] += unit_mem[u]
            busy[d] += unit_time[u]
        return unit_device[unit]

    lpt = deal(np.argsort(-unit_time, kind="stable"), lambda k, devs, busy: devs[np.argmin(busy[devs])])
    rr = deal(np.argsort(first, kind="stable"), lambda k, devs, busy: devs[k % len(devs)])
    return {"lpt": lpt, "round_robin": rr}
