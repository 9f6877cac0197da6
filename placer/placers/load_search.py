"""Local search on the throughput objective: move units off the busiest device.

A pipeline split keeps each device's piece contiguous; the objective does not
require it. Starting from any placement, `improve` repeatedly tries every
move of one colocation unit from the busiest device to another device (within
memory), scores all of them at once with the exact model
(incrementally: a move changes only the charges of the moved ops and their
producers; on big graphs a bounded set of moves, the busiest device's border
first; when none helps, swaps of a unit of the busiest device with one
elsewhere), and takes the best one that lowers the max
load, or keeps it and lowers the sum of squared loads (which breaks ties
between equally busy devices and guarantees termination).

The search is bounded by work, not by the clock, so that its answer depends
on its inputs only, not on how busy the machine is: a descent makes at most
`SEARCH_MOVES` moves, the iterated search (`iterate`) at most `KICKS` kicks.
A `Deadline` (`placer.placers.time_cap`) may cut either short as a safety cap
on huge graphs; the caller then says so (``time_capped``).
"""

from __future__ import annotations

import numba
import numpy as np

from placer.objectives import ThroughputModel
from placer.placers.time_cap import Deadline
from placer.simulator.transfer import transfer_time

SEARCH_MOVES = 500
"""Moves per descent. Most descents on graphs/ reach a local optimum sooner;
at 5-7 ms of CPU a move on the op-level graphs, 500 keeps a descent within a
few seconds. Run to their end (up to 1,300 moves), the descents on
inception_v3 and transformer would lower the max load on 4gpu by 4% and 1%
more, in about twice the time."""

KICKS = 300
"""Kicks of the iterated search: about 3 s of CPU on rnnlm (1,424 units, the
biggest graph of graphs/ that gets the iterated search, about 10 ms a kick)."""


def _best(moves: np.ndarray, cur: tuple[float, float], score) -> int | None:
    """Index of the best improving move (lower max load, or same max and lower sum of squares), if any."""
    cand = score(moves)
    peak = cand.max(axis=1)
    sumsq = (cand ** 2).sum(axis=1)
    k = int(np.lexsort((sumsq, peak))[0])
    better = peak[k] < cur[0] * (1 - 1e-12) or (peak[k] <= cur[0] and sumsq[k] < cur[1] * (1 - 1e-12))
    return k if better else None


def improve(model: ThroughputModel, assignment: np.ndarray, unit: np.ndarray, *, seed: int = 0,
            max_moves: int = SEARCH_MOVES, max_candidates: int = 4096, swaps: bool = True,
            deadline: Deadline | None = None) -> tuple[np.ndarray, float]:
    """Steepest descent from `assignment`; returns ``(assignment, max_load)``.

    Parameters
    ----------
    model : the compiled objective.
    assignment : device per op to start from (colocation respected).
    unit : unit id per op; a move carries a whole unit.
    seed : orders ties between equally good moves and samples candidates.
    max_moves : stop after this many moves (the work bound).
    deadline : also stop once it has passed (a safety cap; None: no cap).
    max_candidates : moves scored per step; past it, the units at the busiest
        device's border (an edge to another device) are all tried and a
        seeded sample of the others fills the rest.
    swaps : when no single move improves, try swapping a unit of the busiest
        device with one of another device (a seeded sample of pairs).
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
    seen = np.full(D, -1, dtype=np.int64)
    mark = np.full(len(a), -1, dtype=np.int64)

    def score(moves: np.ndarray) -> np.ndarray:
        cand = np.empty((len(moves), D))
        _score_moves(a, loads, moves, order, bounds, model.times, model.s_off, model.s_idx, p_off, p_idx,
                     model.xfer_time, model.out_bytes, model.bandwidth, model.latency, model.pays, seen, mark, cand)
        return cand

    for _ in range(max_moves):
        if D < 2 or (deadline is not None and deadline.passed()):
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
        moves = _unit_moves(units, busiest, held, unit_mem, model.memory_bytes)
        k = _best(moves, cur, score) if len(moves) else None
        if k is None and swaps:  # no single move helps: swap a unit of the busiest device with another's
            others = np.flatnonzero(unit_device != busiest)
            per_side = max(1, int(np.sqrt(max_candidates)))
            mine = units if len(units) <= per_side else rng.choice(units, per_side, replace=False)
            theirs = others if len(others) <= per_side else rng.choice(others, per_side, replace=False)
            moves = _swaps(mine, theirs, busiest, unit_device, held, unit_mem, model.memory_bytes)
            k = _best(moves, cur, score) if len(moves) else None
        if k is None:
            break
        for u, d in ((int(moves[k, 0]), int(moves[k, 1])), (int(moves[k, 2]), int(moves[k, 3]))):
            if u < 0:
                continue
            held[unit_device[u]] -= unit_mem[u]
            held[d] += unit_mem[u]
            unit_device[u] = d
            a[order[bounds[u]:bounds[u + 1]]] = d
        loads = model.load_batch(a)[0]  # exact again (the scores were incremental)
        cur = (float(loads.max()), float((loads ** 2).sum()))
    return a, float(loads.max())


def _unit_moves(units: np.ndarray, busiest: int, held: np.ndarray, unit_mem: np.ndarray,
                memory: np.ndarray) -> np.ndarray:
    """Moves ``(unit, device, -1, -1)`` of each of `units` (off the busiest device) to each other device
    whose memory holds it, unit by unit, devices in order."""
    D = len(held)
    u = np.repeat(np.asarray(units, dtype=np.int64), D)
    d = np.tile(np.arange(D, dtype=np.int64), len(units))
    ok = (d != busiest) & (held[d] + unit_mem[u] <= memory[d])
    none = np.full(int(ok.sum()), -1)
    return np.stack([u[ok], d[ok], none, none], axis=1)


def _swaps(mine: np.ndarray, theirs: np.ndarray, busiest: int, unit_device: np.ndarray, held: np.ndarray,
           unit_mem: np.ndarray, memory: np.ndarray) -> np.ndarray:
    """Swaps ``(u, device of v, v, busiest)`` of each unit u of `mine` (on the busiest device) with each unit v
    of `theirs` where both devices' memory holds the result, u by u, v in order."""
    u = np.repeat(np.asarray(mine, dtype=np.int64), len(theirs))
    v = np.tile(np.asarray(theirs, dtype=np.int64), len(mine))
    dv = unit_device[v]
    ok = ((held[dv] - unit_mem[v] + unit_mem[u] <= memory[dv])
          & (held[busiest] - unit_mem[u] + unit_mem[v] <= memory[busiest]))
    return np.stack([u[ok], dv[ok], v[ok], np.full(int(ok.sum()), busiest)], axis=1)


@numba.njit(cache=True)
def _charge(w, a, sign, s_off, s_idx, xfer_time, out_bytes, bandwidth, latency, pays, seen, stamp, load):
    """Add (sign=1) or remove (sign=-1) op `w`'s communication charges under `a` (the objective's rule)."""
    dw = a[w]
    send = 0.0
    sends = False
    for k in range(s_off[w], s_off[w + 1]):
        dv = a[s_idx[k]]
        if dv == dw or seen[dv] == stamp:
            continue
        seen[dv] = stamp
        c = transfer_time(xfer_time, out_bytes, w, latency, bandwidth, dw, dv)
        sends = True
        if c > send:
            send = c
        if pays[dv]:
            load[dv] += sign * c
    if sends and pays[dw]:
        load[dw] += sign * send


@numba.njit(cache=True)
def _score_moves(a, loads, moves, order, bounds, times, s_off, s_idx, p_off, p_idx, xfer_time, out_bytes,
                 bandwidth, latency, pays, seen, mark, out):
    """Per-device loads after each move, computed from what the move touches.

    A move is a row ``(unit, device, unit2, device2)``: the unit goes to the
    device, and unit2 (when not -1) to device2, so a swap is one move. Only
    the moved ops and their producers change charges, so a move costs the
    degree of its units, not a pass over the graph.
    """
    stamp = 0
    seen[:] = -1
    affected = np.empty(a.shape[0], dtype=np.int64)
    for k in range(moves.shape[0]):
        out[k, :] = loads
        n_aff = 0
        for part in range(2):
            u = moves[k, 2 * part]
            if u < 0:
                continue
            for t in range(bounds[u], bounds[u + 1]):  # the units' ops and their producers, once each
                v = order[t]
                if mark[v] != k:
                    mark[v] = k
                    affected[n_aff] = v
                    n_aff += 1
                for q in range(p_off[v], p_off[v + 1]):
                    w = p_idx[q]
                    if mark[w] != k:
                        mark[w] = k
                        affected[n_aff] = w
                        n_aff += 1
        for i in range(n_aff):
            stamp += 1
            _charge(affected[i], a, -1.0, s_off, s_idx, xfer_time, out_bytes, bandwidth, latency, pays, seen,
                    stamp, out[k])
        src0 = a[order[bounds[moves[k, 0]]]]
        src1 = a[order[bounds[moves[k, 2]]]] if moves[k, 2] >= 0 else -1
        for part in range(2):
            u, d = moves[k, 2 * part], moves[k, 2 * part + 1]
            if u < 0:
                continue
            for t in range(bounds[u], bounds[u + 1]):
                v = order[t]
                out[k, a[v]] -= times[v, a[v]]
                out[k, d] += times[v, d]
                a[v] = d
        for i in range(n_aff):
            stamp += 1
            _charge(affected[i], a, 1.0, s_off, s_idx, xfer_time, out_bytes, bandwidth, latency, pays, seen,
                    stamp, out[k])
        for part in range(2):  # put the units back
            u = moves[k, 2 * part]
            if u < 0:
                continue
            src = src0 if part == 0 else src1
            for t in range(bounds[u], bounds[u + 1]):
                a[order[t]] = src
        for i in range(n_aff):  # clear the marks for the next move
            mark[affected[i]] = -1


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


def iterate(model: ThroughputModel, assignment: np.ndarray, unit: np.ndarray, *, seed: int = 0,
            kicks: int = KICKS, kick_size: int = 3, max_moves: int = SEARCH_MOVES,
            deadline: Deadline | None = None) -> tuple[np.ndarray, float]:
    """Iterated local search: kick the best placement, descend, keep what is better.

    A kick sends `kick_size` random units to random devices (kicks that break
    memory are skipped); `improve` then descends (at most `max_moves` moves).
    `kicks` bounds the work, so a run is reproducible unless `deadline` cuts
    it first. Returns ``(assignment, max_load)``, never worse than the start.
    """
    rng = np.random.default_rng(seed)
    best = np.array(assignment, dtype=np.int64)
    best_value = model.max_load(best)
    num_units = int(unit.max()) + 1
    if model.num_devices < 2 or num_units < 2:
        return best, best_value
    for k in range(kicks):
        if deadline is not None and deadline.passed():
            break
        unit_device = np.empty(num_units, dtype=np.int64)
        unit_device[unit] = best
        moved = rng.choice(num_units, size=min(kick_size, num_units), replace=False)
        unit_device[moved] = rng.integers(0, model.num_devices, size=len(moved))
        kicked = unit_device[unit]
        if not model.loads(kicked).memory_ok:
            continue
        a, value = improve(model, kicked, unit, seed=seed + k + 1, max_moves=max_moves, deadline=deadline)
        if value < best_value * (1 - 1e-12):
            best, best_value = a, value
    return best, best_value
