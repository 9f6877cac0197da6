"""A plain-Python simulator with the same rules as `kernel.py`, kept for checking it.

It reads as the rules are stated and is about a hundred times slower; the
tests require both to give identical answers on random graphs and placements.

A transfer from device d to device e follows the route from d to e (a list
of link directions, `placer.topology.Routes`; in a flat cluster one
direction of the pair's own link). It starts when its data is ready and every
direction on its route is free, takes the route's summed latency plus bytes
over its bottleneck bandwidth, and keeps each direction on its route busy for
that direction's own latency + bytes / bandwidth from its start (a profiled
``transfer_time``: for that time). Each direction serves transfers in the
order they were asked for (FIFO).
"""

from __future__ import annotations

import heapq

import numpy as np


def simulate_reference(sim, assignment) -> tuple[float, np.ndarray, np.ndarray, float]:
    """``(step_time, busy, peak_memory, bytes_moved)`` of a placement.

    `sim` is a `placer.simulator.Simulator` (only its compiled arrays are read).
    """
    place = [int(d) for d in assignment]
    n, D = len(place), sim.num_devices
    succ = [sim.s_idx[sim.s_off[i]:sim.s_off[i + 1]].tolist() for i in range(n)]
    pending = np.diff(sim.p_off).tolist()
    rank = sim.rank.tolist()
    ready = [[] for _ in range(D)]  # heaps of (ready time, rank, op)
    events = []  # heap of (time, order, kind, op, device)
    slots, pool = sim.slots.tolist(), sim.pool  # ops at once per device; in the whole cluster (<= 0: any)
    running = [0] * D
    busy = np.zeros(D)
    routes = sim.routes
    link_free = np.zeros(routes.bandwidth.shape[0])  # when each link direction is next free
    start, finish = [0.0] * n, [0.0] * n
    sends = {}  # (op, device) -> (start, end)
    moved = 0.0
    for i in range(n):
        if pending[i] == 0:
            heapq.heappush(ready[place[i]], (0.0, rank[i], i))

    def arrive(op, dev, t):
        for w in succ[op]:
            if place[w] == dev:
                pending[w] -= 1
                if pending[w] == 0:
                    heapq.heappush(ready[dev], (t, rank[w], w))

    now = 0.0
    while True:
        while pool <= 0 or sum(running) < pool:
            free = [d for d in range(D) if running[d] < slots[d] and ready[d]]
            if not free:
                break
            d = min(free, key=lambda e: ready[e][0][:2])  # the op that became ready first
            _, _, v = heapq.heappop(ready[d])
            dur_v = sim.times[v, d]
            if pool > 0:  # a shared pool's thread hands the output to each other device reading it
                for e in sorted({place[w] for w in succ[v]} - {d}):
                    dur_v += (sim.xfer_time[v] if sim.xfer_time[v] >= 0
                              else sim.latency[d, e] + sim.out_bytes[v] / sim.bandwidth[d, e])
            start[v], finish[v] = now, now + dur_v
            busy[d] += dur_v
            running[d] += 1
            heapq.heappush(events, (finish[v], rank[v], "finish", v, d))
        if not events:
            break
        now = events[0][0]
        while events and events[0][0] == now:
            _, _, kind, v, d = heapq.heappop(events)
            if kind == "arrive":
                arrive(v, d, now)
                continue
            running[d] -= 1
            arrive(v, d, now)
            for w in succ[v]:
                e = place[w]
                if e != d and (v, e) not in sends:
                    route = routes.resource[routes.offset[d * D + e]:routes.offset[d * D + e + 1]].tolist()
                    nbytes, profiled = sim.out_bytes[v], sim.xfer_time[v]
                    if profiled >= 0:
                        dur, holds = profiled, [profiled] * len(route)
                    else:
                        latency = 0.0
                        for r in route:  # in route order, as the kernel sums
                            latency += routes.latency[r]
                        dur = latency + nbytes / min(routes.bandwidth[r] for r in route)
                        holds = [routes.latency[r] + nbytes / routes.bandwidth[r] for r in route]
                    if pool > 0:
                        dur, holds = 0.0, [0.0] * len(route)  # already in the op's time
                    s = max([now] + [link_free[r] for r in route])
                    for r, hold in zip(route, holds):
                        link_free[r] = s + hold
                    sends[(v, e)] = (s, s + dur)
                    moved += sim.out_bytes[v]
                    heapq.heappush(events, (s + dur, n + rank[v] * D + e, "arrive", v, e))

    # memory: (alloc time, free time, device, bytes) per tensor copy
    intervals = []
    for i in range(n):
        last = {}
        for w in succ[i]:
            last[place[w]] = max(last.get(place[w], -1.0), finish[w])
        own_free = max([finish[i], last.get(place[i], -1.0)] + [end for (op, _), (_, end) in sends.items() if op == i])
        intervals.append((start[i], own_free, place[i], sim.held[i, place[i]]))
        for (op, e), (s, end) in sends.items():
            if op == i:
                intervals.append((s, max(last.get(e, -1.0), end), e, sim.out_bytes[i]))
    # at one instant: frees (0), then allocations (1), then frees of tensors that lived no time (2)
    points = sorted(
        [(f, 0 if f > a else 2, d, -b) for (a, f, d, b) in intervals] + [(a, 1, d, b) for (a, _, d, b) in intervals]
    )
    cur, peak = np.zeros(D), np.zeros(D)
    for _, _, d, delta in points:
        cur[d] += delta
        peak[d] = max(peak[d], cur[d])
    peak += np.bincount(place, weights=sim.params, minlength=D)
    return max(finish), busy, peak, moved
