"""How list schedulers and partitioners see routed, shared transfers (docs/topology.md).

- `Transfers`: the inputs of an op reaching a device, each output crossing
  once, booked on the link directions of its route with the simulator's rule
  (`placer.simulator.transfer.LinkBook`) or, for schedulers that plan out of
  time order, into the links' idle gaps (`GapBook`);
- `route_mapping`: which of a partitioner's alike devices each part gets, so
  that the parts that talk most share the fewest link directions.
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np
from numba import njit

from placer.placers.common import Problem
from placer.simulator.transfer import LinkBook, link_time


class Transfers:
    """Transfers as the simulator makes them (`placer.simulator.transfer.LinkBook`): each follows its
    route and waits until every link direction on it is free (FIFO), and an output crosses to a device
    once, however many consumers it has there.

    Baechi's scheduler models communication the same way (a channel per
    device, tensors cached on the receiver); here the channels are the link
    directions of the routes, as in `placer.simulator`. m-ETF and m-SCT use
    it on every cluster, HEFT and CPOP on a topology (`placer.placers.heft.ListScheduler`).

    Parameters
    ----------
    problem : the compiled graph and cluster.
    assignment, finish : the scheduler's own device and finish time per op,
        read as it fills them (-1: not placed yet).
    gaps : book each transfer into the earliest idle gap of its route's
        directions (`GapBook`, for schedulers that place out of time order)
        instead of after every transfer booked before.
    """

    def __init__(self, problem: Problem, assignment: np.ndarray, finish: np.ndarray, gaps: bool = False):
        self.problem = problem
        self.gaps = gaps
        self.book = GapBook(problem.routes, problem.num_devices) if gaps else problem.link_book()
        self.arrived: dict[tuple[int, int], float] = {}
        self.assignment = assignment
        self.finish = finish
        self.p_off, self.p_idx = problem.graph.predecessors
        self.out_bytes = problem.out_bytes.tolist()
        self.xfer = problem.xfer.tolist()
        if not gaps:  # `ready_row`'s compiled pass reads arrays: mirrors of `arrived` and the book's free times
            book = self.book
            self._arrived = np.full((problem.num_ops, book.num_devices), -1.0)
            self._free = np.array(book.free, dtype=np.float64)
            self._route_arrays = route_arrays(problem, book)
            self._plan = np.zeros(len(book.free))
            self._planned = np.zeros(len(book.free), dtype=np.bool_)

    def ready_time(self, j: int, d: int, commit: bool = False) -> tuple[float, set[int]]:
        """When op j's inputs can all be on device `d`, and the devices whose sends may now start later.

        New sends are planned in the order their data is ready (ties: input
        order). With `commit`, they are booked on the links and cached, and the
        second item names every device with a route over a direction just
        booked (without `commit` it is empty).
        """
        ready = 0.0
        pending: list[tuple[float, int, int]] = []
        for m in self.p_idx[self.p_off[j]:self.p_off[j + 1]].tolist():
            q = int(self.assignment[m])
            if q == d:
                t = float(self.finish[m])
            else:
                t = self.arrived.get((m, d), -1.0)
                if t < 0:
                    pending.append((float(self.finish[m]), m, q))
                    continue
            if t > ready:
                ready = t
        if not pending:
            return ready, set()
        pending.sort(key=lambda p: p[0])  # stable: input order among equal finishes
        book = self.book
        plan = None if commit else {}
        for f, m, q in pending:
            t = book.send(q, d, f, self.out_bytes[m], self.xfer[m], plan)
            if commit:
                self.arrived[(m, d)] = t
            if t > ready:
                ready = t
        touched: set[int] = set()
        if commit:
            D = book.num_devices
            for _, m, q in pending:
                for r in book.route[q * D + d]:
                    touched.update(book.senders_over[r])
                if not self.gaps:  # keep `ready_row`'s arrays equal to the book
                    self._arrived[m, d] = self.arrived[(m, d)]
                    for r in book.route[q * D + d]:
                        self._free[r] = book.free[r]
        return ready, touched

    def ready_row(self, j: int, devices: np.ndarray) -> list[float]:
        """``[ready_time(j, d)[0] for d in devices]``, the same floats, in one compiled pass over j's inputs.

        Without `commit` nothing is booked, so each device's plan starts from
        the same book: the sends are `LinkBook.send`'s arithmetic (`_ready_row`),
        and the inputs are sorted once (a stable sort of all of them orders
        every device's subset as sorting that subset would). With `gaps`,
        device by device.
        """
        if self.gaps:
            return [self.ready_time(j, d)[0] for d in devices.tolist()]
        r_off, r_res, res_lat, res_bw, route_lat, route_bw = self._route_arrays
        return _ready_row(j, devices, self.p_off, self.p_idx, self.finish, self.assignment,
                          self._arrived, self._free, r_off, r_res, res_lat, res_bw, route_lat, route_bw,
                          self.problem.out_bytes, self.problem.xfer, self._plan, self._planned).tolist()


@njit(cache=True)
def _ready_row(j, devices, p_off, p_idx, finish, assignment, arrived, free, r_off, r_res, res_lat, res_bw,
               route_lat, route_bw, out_bytes, xfer, plan, planned):
    """`Transfers.ready_row` compiled: per device, when op j's inputs can all be there if the sends not
    made yet were planned now, in the order their data is ready (ties: input order), each after its route's
    directions are free (`LinkBook.send`'s arithmetic, into `plan` instead of the book)."""
    D = arrived.shape[1]
    n_in = p_off[j + 1] - p_off[j]
    inputs = inputs_by_finish(j, p_off, p_idx, finish)
    row = np.empty(len(devices))
    for c in range(len(devices)):
        d = devices[c]
        ready = 0.0
        for a in range(n_in):
            m = inputs[a]
            t = arrival(m, d, assignment, finish, arrived)
            if t < 0:  # not sent yet: plan it after the route's directions are free
                q = assignment[m]
                k = q * D + d
                s = finish[m]
                for e in range(r_off[k], r_off[k + 1]):
                    r = r_res[e]
                    busy = plan[r] if planned[r] else free[r]
                    if busy > s:
                        s = busy
                profiled = xfer[m]
                if profiled >= 0.0:
                    for e in range(r_off[k], r_off[k + 1]):
                        plan[r_res[e]] = s + profiled
                        planned[r_res[e]] = True
                    t = s + profiled
                else:
                    nbytes = out_bytes[m]
                    for e in range(r_off[k], r_off[k + 1]):
                        r = r_res[e]
                        plan[r] = s + link_time(res_lat[r], nbytes, res_bw[r])
                        planned[r] = True
                    t = s + link_time(route_lat[k], nbytes, route_bw[k])
            if t > ready:
                ready = t
        row[c] = ready
        planned[:] = False
    return row


def route_arrays(problem: Problem, book: LinkBook) -> tuple[np.ndarray, ...]:
    """The routes as compiled passes read them: ``(offset, resource, res_lat, res_bw, route_lat, route_bw)``,
    each pair's route k = q * D + d being ``resource[offset[k]:offset[k + 1]]``, with `book`'s arithmetic."""
    routes = problem.routes
    return (routes.offset.astype(np.int64), routes.resource.astype(np.int64), np.array(book.res_lat),
            np.array(book.res_bw), np.array(book.route_lat), np.array(book.route_bw))


@njit(cache=True, inline="always")
def arrival(m, d, assignment, finish, arrived):
    """When op m's output is on device d: its finish there, the arrival of its copy, or -1 if not sent yet."""
    return finish[m] if assignment[m] == d else arrived[m, d]


@njit(cache=True)
def inputs_by_finish(j, p_off, p_idx, finish):
    """Op j's inputs in the order their data is ready (a stable insertion sort by finish: ties keep input
    order, as Python's sort of the sends does)."""
    inputs = p_idx[p_off[j]:p_off[j + 1]].copy()
    for a in range(1, len(inputs)):
        x = inputs[a]
        b = a - 1
        while b >= 0 and finish[inputs[b]] > finish[x]:
            inputs[b + 1] = inputs[b]
            b -= 1
        inputs[b + 1] = x
    return inputs


def earliest_slot(starts: list[float], ends: list[float], ready: float, duration: float) -> tuple[float, int]:
    """Earliest start >= `ready` of an idle gap of `duration` (insertion policy), and its index."""
    return _py_gap_from(starts, ends, bisect_right(ends, ready), len(starts), ready, duration)


@njit(cache=True)
def gap_from(starts, ends, k, n, ready, duration):
    """`earliest_slot`'s scan of the first n intervals (lists or arrays), from k, the first that ends after
    `ready`: the earliest start >= `ready` of an idle gap of `duration`, and its index."""
    t = ready
    while k < n:
        if t + duration <= starts[k]:
            return t, k
        e = ends[k]
        if e > t:
            t = e
        k += 1
    return t, k


_py_gap_from = gap_from.py_func


_py_link_time = link_time.py_func


class GapBook(LinkBook):
    """`LinkBook` for a scheduler that plans out of time order: a transfer takes the earliest time at or
    after its data is ready when every direction on its route has an idle gap as long as that direction's
    hold, as HEFT's insertion policy places ops in a device's idle gaps.

    Booked in time order this is the simulator's FIFO rule; booked out of it, a transfer planned later
    but happening earlier is not queued behind the ones already planned.
    """

    def __init__(self, routes, num_devices: int):
        super().__init__(routes, num_devices)
        self.starts: list[list[float]] = [[] for _ in self.res_bw]
        self.ends: list[list[float]] = [[] for _ in self.res_bw]

    def _holds(self, k: int, nbytes: float, profiled: float) -> tuple[list[float], float]:
        route = self.route[k]
        if profiled >= 0.0:
            return [profiled] * len(route), profiled
        return ([_py_link_time(self.res_lat[r], nbytes, self.res_bw[r]) for r in route],
                _py_link_time(self.route_lat[k], nbytes, self.route_bw[k]))

    def _fits(self, r: int, t: float, hold: float, pending: dict | None) -> float:
        """The earliest time >= t with direction r idle for `hold`, counting tentative bookings too.

        The tentative bookings of a plan are kept like the booked ones (disjoint, sorted by start), so
        both are searched by `earliest_slot`: each search moves t only past times that overlap an
        interval, so alternating them until neither moves t gives the earliest time free of both.
        """
        extra = pending.get(r) if pending else None
        while True:
            t, _ = earliest_slot(self.starts[r], self.ends[r], t, hold)
            if extra is None:
                return t
            t2, _ = earliest_slot(extra[0], extra[1], t, hold)
            if t2 == t:
                return t
            t = t2

    def send(self, q: int, d: int, ready: float, nbytes: float, profiled: float = -1.0,
             pending: dict | None = None) -> float:
        """Book a transfer (see `LinkBook.send`) into the earliest common gap; its arrival time."""
        k = q * self.num_devices + d
        holds, duration = self._holds(k, nbytes, profiled)
        route = self.route[k]
        t = ready
        moved = True
        while moved:  # until every direction is idle from t for its hold
            moved = False
            for r, h in zip(route, holds):
                if h > 0.0:
                    t2 = self._fits(r, t, h, pending)
                    if t2 > t:
                        t, moved = t2, True
        for r, h in zip(route, holds):
            if h <= 0.0:
                continue
            starts, ends = (self.starts[r], self.ends[r]) if pending is None else pending.setdefault(r, ([], []))
            book_interval(starts, ends, t, t + h)
        return t + duration


def book_interval(starts: list[float], ends: list[float], start: float, end: float) -> None:
    """Add the busy interval [start, end) to a direction's sorted, disjoint intervals (it overlaps none),
    merged with any it touches: no hold of 0 is searched for, so `earliest_slot` finds the same start for
    every hold, and a direction busy back to back is one interval to step over, not thousands (what made
    HEFT and CPOP grow faster than ops at 100k ops)."""
    i = bisect_right(starts, start)
    after = i < len(starts) and starts[i] == end
    if i > 0 and ends[i - 1] == start:
        if after:
            ends[i - 1] = ends[i]
            del starts[i], ends[i]
        else:
            ends[i - 1] = end
    elif after:
        starts[i] = start
    else:
        starts.insert(i, start)
        ends.insert(i, end)


def route_mapping(problem: Problem, unit_device: np.ndarray, devices: np.ndarray) -> np.ndarray:
    """Devices swapped among `devices` so that units that talk share few link directions: ``out[d]``.

    A partitioner decides which units share a device; on a topology which of
    the alike devices each such group gets also decides which transfers queue
    for the same link direction (two GPUs behind one PCIe switch share its
    uplink; NVSwitch GPUs share nothing but their own ports). The rule: count
    the bytes each device sends each other one under `unit_device` (an output
    once per other device reading it), charge each transfer's bytes /
    bandwidth to every link direction on its route, and minimise the busiest
    direction's total (transfers on one direction run one after another, so
    it bounds the step's communication), then the sum over directions (fewer
    and faster hops). Only devices that are alike (kind, speed, memory) swap,
    so the partitioner's balance holds. Search: pairwise swaps while one
    improves, the best first (ties: the first pair in `devices`' order), so
    the answer is deterministic and no swap is made when none helps. On a
    flat cluster nothing is swapped.

    Parameters
    ----------
    problem : the compiled graph and cluster.
    unit_device : the partitioner's device per unit.
    devices : the devices that may swap.

    Returns
    -------
    int64[num_devices]: the device that takes over each device's units (the
    identity outside `devices`); ``out[unit_device]`` is the new device per unit.
    """
    D = problem.num_devices
    perm = np.arange(D, dtype=np.int64)
    devices = np.asarray(devices, dtype=np.int64)
    k = len(devices)
    if not problem.routed or k < 2:
        return perm
    place = np.asarray(unit_device, dtype=np.int64)[problem.unit]
    p_off, p_idx = problem.graph.predecessors
    consumer = np.repeat(np.arange(problem.num_ops), np.diff(p_off))
    cross = place[p_idx] != place[consumer]
    sends = np.unique(p_idx[cross] * D + place[consumer[cross]])  # an output once per other device
    producer = sends // D
    traffic = np.zeros((D, D))
    np.add.at(traffic, (place[producer], sends % D), problem.out_bytes[producer])
    routes = problem.routes
    hold = np.zeros((D, D, len(routes.bandwidth)))  # seconds per byte on each direction of each pair's route
    for a in range(D):
        for b in range(D):
            rs = routes.resource[routes.offset[a * D + b]:routes.offset[a * D + b + 1]]
            hold[a, b, rs] = 1.0 / routes.bandwidth[rs]
    devs = problem.cluster.devices
    alike = [(devs[d].kind, devs[d].peak_flops, devs[d].memory_bytes, devs[d].memory_bandwidth,
              devs[d].op_overhead) for d in devices.tolist()]

    def cost(p: np.ndarray) -> tuple[float, float]:
        load = np.einsum("pq,pqr->r", traffic, hold[np.ix_(p, p)])
        return float(load.max()), float(load.sum())

    best = cost(perm)
    while True:
        step = None
        for i in range(k):
            for j in range(i + 1, k):
                if alike[i] != alike[j]:
                    continue
                trial = perm.copy()
                a, b = devices[i], devices[j]
                trial[a], trial[b] = perm[b], perm[a]
                c = cost(trial)
                if c < best and (step is None or c < step[0]):
                    step = (c, trial)
        if step is None:
            return perm
        best, perm = step
