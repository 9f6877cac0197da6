"""HEFT's and CPOP's processor selection on a topology, compiled: the same schedule, op for op.

`placer.placers.heft.ListScheduler` places one op at a time at its earliest
finish among the devices offered (insertion policy), its inputs' transfers
booked into the idle gaps of their routes' link directions
(`placer.placers.routes.GapBook`). In Python that costs some 100 us an op,
most of it searching and inserting into sorted interval lists; `RoutedSlots`
does the same arithmetic in one compiled call per op, so a schedule of 12k ops
takes a fraction of a second and a policy's proposals can steer six of them
(`placer.rl.steering`) within a zero-shot answer's time. The plain-Python
path stays as the reference: the tests keep the two schedules identical.

Intervals live in ``[rows, capacity]`` arrays with a count per row (sorted,
disjoint; a link direction's touching intervals merged, as `book_interval`
does), grown by Python when a call says they could overflow.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from placer.placers.common import Problem
from placer.placers.routes import arrival, gap_from, inputs_by_finish, route_arrays
from placer.simulator.transfer import link_time


class RoutedSlots:
    """Device timelines and the link directions' booked gaps of one list schedule on a topology.

    Parameters
    ----------
    problem : the compiled graph and cluster (a topology: `Problem.routed`).
    assignment, start, finish : the scheduler's arrays, filled in place by `place`.
    """

    def __init__(self, problem: Problem, assignment: np.ndarray, start: np.ndarray, finish: np.ndarray):
        book = problem.link_book()  # the route arithmetic, as the simulator and `GapBook` have it
        self.assignment, self.start, self.finish = assignment, start, finish
        self.times = np.ascontiguousarray(problem.times, dtype=np.float64)
        self.p_off, self.p_idx = (np.asarray(a, dtype=np.int64) for a in problem.graph.predecessors)
        self.out_bytes = np.asarray(problem.out_bytes, dtype=np.float64)
        self.xfer = np.asarray(problem.xfer, dtype=np.float64)
        self.route = route_arrays(problem, book)
        D, R = problem.num_devices, len(book.res_bw)
        self.arrived = np.full((problem.num_ops, D), -1.0)  # when op m's output is on device d (-1: not sent)
        in_degree = int(np.diff(self.p_off).max()) if problem.num_ops else 0
        self.link = _Intervals(R, 64)
        self.plan = _Intervals(R, in_degree + 1)  # one device's tentative sends, never more than its inputs
        self.device = _Intervals(D, 64)
        self._args = self._arguments()

    def _arguments(self) -> tuple:
        return (self.times, self.p_off, self.p_idx, self.assignment, self.start, self.finish, self.arrived,
                self.out_bytes, self.xfer, *self.route, *self.link.arrays, *self.plan.arrays, *self.device.arrays)

    def place(self, i: int, choices: list[int]) -> int:
        """Put op i on the device of `choices` where it finishes first (its inputs' sends booked); that device."""
        choices = np.asarray(choices, dtype=np.int64)
        d = _place(i, choices, *self._args)
        if d < 0:  # a row could overflow: grow the rows, then place
            self.link.make_room(int(self.p_off[i + 1] - self.p_off[i]))
            self.device.make_room(1)
            self._args = self._arguments()
            d = _place(i, choices, *self._args)
        return int(d)


class _Intervals:
    """Sorted, disjoint intervals per row: ``starts``/``ends`` ``[rows, capacity]`` and ``count[rows]``."""

    def __init__(self, rows: int, capacity: int):
        self.starts = np.zeros((rows, capacity))
        self.ends = np.zeros((rows, capacity))
        self.count = np.zeros(rows, dtype=np.int64)

    @property
    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.starts, self.ends, self.count

    def make_room(self, more: int) -> None:
        """Grow (double) until every row can take `more` intervals (the arrays are new ones then)."""
        need = int(self.count.max(initial=0)) + more
        capacity = self.starts.shape[1]
        if need <= capacity:
            return
        while capacity < need:
            capacity *= 2
        grow = ((0, 0), (0, capacity - self.starts.shape[1]))
        self.starts, self.ends = np.pad(self.starts, grow), np.pad(self.ends, grow)


@njit(cache=True)
def _earliest(starts, ends, n, ready, duration):
    """`placer.placers.routes.earliest_slot` on one row: the earliest start >= ready of an idle gap of
    `duration`, and its index."""
    return gap_from(starts, ends, np.searchsorted(ends[:n], ready, side="right"), n, ready, duration)


@njit(cache=True)
def _book(starts, ends, count, r, start, end):
    """`placer.placers.routes.book_interval` on row r: insert [start, end), merged with any it touches."""
    n = count[r]
    i = np.searchsorted(starts[r, :n], start, side="right")
    after = i < n and starts[r, i] == end
    if i > 0 and ends[r, i - 1] == start:
        if after:
            ends[r, i - 1] = ends[r, i]
            for a in range(i, n - 1):
                starts[r, a] = starts[r, a + 1]
                ends[r, a] = ends[r, a + 1]
            count[r] = n - 1
        else:
            ends[r, i - 1] = end
    elif after:
        starts[r, i] = start
    else:
        for a in range(n, i, -1):
            starts[r, a] = starts[r, a - 1]
            ends[r, a] = ends[r, a - 1]
        starts[r, i] = start
        ends[r, i] = end
        count[r] = n + 1


@njit(cache=True)
def _fits(r, t, hold, tentative, ls, le, lc, ps, pe, pc):
    """`GapBook._fits`: the earliest time >= t with direction r idle for `hold`, counting the plan's
    tentative bookings when `tentative` (each search moves t only past an overlap, so alternating the two
    until neither moves t gives the earliest time free of both)."""
    while True:
        t, _ = _earliest(ls[r], le[r], lc[r], t, hold)
        if not tentative:
            return t
        t2, _ = _earliest(ps[r], pe[r], pc[r], t, hold)
        if t2 == t:
            return t
        t = t2


@njit(cache=True)
def _send(k, ready, nbytes, profiled, tentative, r_off, r_res, res_lat, res_bw, route_lat, route_bw,
          ls, le, lc, ps, pe, pc):
    """`GapBook.send` over route k (q * D + d): book the transfer into the earliest gap common to the
    route's directions, in the plan rows when `tentative`, else for good; its arrival time."""
    a, b = r_off[k], r_off[k + 1]
    holds = np.empty(b - a)
    for e in range(a, b):
        r = r_res[e]
        holds[e - a] = profiled if profiled >= 0.0 else link_time(res_lat[r], nbytes, res_bw[r])
    duration = profiled if profiled >= 0.0 else link_time(route_lat[k], nbytes, route_bw[k])
    t = ready
    moved = True
    while moved:  # until every direction is idle from t for its hold
        moved = False
        for e in range(a, b):
            h = holds[e - a]
            if h > 0.0:
                t2 = _fits(r_res[e], t, h, tentative, ls, le, lc, ps, pe, pc)
                if t2 > t:
                    t = t2
                    moved = True
    for e in range(a, b):
        h = holds[e - a]
        if h > 0.0:
            if tentative:
                _book(ps, pe, pc, r_res[e], t, t + h)
            else:
                _book(ls, le, lc, r_res[e], t, t + h)
    return t + duration


@njit(cache=True)
def _ready(j, d, commit, inputs, p_off, finish, assignment, arrived, out_bytes, xfer, r_off, r_res, res_lat,
           res_bw, route_lat, route_bw, ls, le, lc, ps, pe, pc):
    """`Transfers.ready_time` with gaps: when op j's inputs can all be on device d, the sends not made yet
    planned in the order their data is ready (`inputs`: j's inputs sorted so, stably); with `commit` they
    are booked and remembered in `arrived`, else planned into the cleared plan rows."""
    D = arrived.shape[1]
    ready = 0.0
    if not commit:
        pc[:] = 0
    for a in range(p_off[j + 1] - p_off[j]):
        m = inputs[a]
        t = arrival(m, d, assignment, finish, arrived)
        if t < 0:  # not sent yet: book (or plan) it now
            t = _send(assignment[m] * D + d, finish[m], out_bytes[m], xfer[m], not commit, r_off, r_res, res_lat,
                      res_bw, route_lat, route_bw, ls, le, lc, ps, pe, pc)
            if commit:
                arrived[m, d] = t
        if t > ready:
            ready = t
    return ready


@njit(cache=True)
def _place(i, choices, times, p_off, p_idx, assignment, start, finish, arrived, out_bytes, xfer, r_off, r_res,
           res_lat, res_bw, route_lat, route_bw, ls, le, lc, ps, pe, pc, ds, de, dc):
    """`ListScheduler.place` on a topology: op i to the device of `choices` where it finishes first
    (insertion policy; ties: the first in `choices`), its inputs' sends booked; that device, or -1 (nothing
    done) when a link direction's row could not take a booking per input, or a device's row one more op."""
    n_in = p_off[i + 1] - p_off[i]
    if lc.max() + n_in > ls.shape[1] or dc.max() + 1 > ds.shape[1]:
        return -1
    inputs = inputs_by_finish(i, p_off, p_idx, finish)
    best_d, best_t, best_dur, best_k = -1, 0.0, 0.0, 0
    for c in range(len(choices)):
        d = choices[c]
        ready = _ready(i, d, False, inputs, p_off, finish, assignment, arrived, out_bytes, xfer, r_off, r_res,
                       res_lat, res_bw, route_lat, route_bw, ls, le, lc, ps, pe, pc)
        dur = times[i, d]
        t, k = _earliest(ds[d], de[d], dc[d], ready, dur)
        if best_d < 0 or t + dur < best_t + best_dur:
            best_d, best_t, best_dur, best_k = d, t, dur, k
    d = best_d
    _ready(i, d, True, inputs, p_off, finish, assignment, arrived, out_bytes, xfer, r_off, r_res, res_lat,
           res_bw, route_lat, route_bw, ls, le, lc, ps, pe, pc)
    if best_dur > 0:  # a zero-length op occupies no time, so it never blocks a gap
        n = dc[d]
        for a in range(n, best_k, -1):
            ds[d, a] = ds[d, a - 1]
            de[d, a] = de[d, a - 1]
        ds[d, best_k] = best_t
        de[d, best_k] = best_t + best_dur
        dc[d] = n + 1
    assignment[i] = d
    start[i] = best_t
    finish[i] = best_t + best_dur
    return d
