"""The simulator's event loop, compiled with numba: the hot loop of training.

Semantics (the pure-Python `reference.py` states the same rules plainly, and
the tests hold the two to identical answers):

- each device runs one op at a time; when it is free it starts, among the ops
  whose inputs are all present on it, the one that became ready first (ties:
  the lower topological rank). A cluster with ``shared_threads = T`` instead
  runs its devices on one pool of T threads, as TensorFlow runs logical CPU
  devices of one process: at most T ops at once in the whole cluster, a
  device may run up to T of them, and a free thread takes the ready op (on
  any device) that became ready first. There a crossing is CPU work, not a
  wire: the thread that runs an op also hands its output to each other device
  that reads it (latency + bytes / bandwidth each, added to the op's time),
  and the copy is there when the op finishes;
- when an op finishes, its output is sent once to every other device that has
  a consumer of it, along the route between the two devices (a list of link
  directions, `placer.topology.Routes`; a flat cluster's route is one
  direction of the pair's own link). The transfer starts when every direction
  on its route is free, in the order transfers were asked for (FIFO), and
  takes the route's summed latency + bytes / its bottleneck bandwidth (or the
  op's own ``transfer_time``); each direction on the route is busy for its
  own latency + bytes / bandwidth from that start (or the ``transfer_time``).
  On a one-hop route both are latency + bytes / bandwidth, the flat model's
  arithmetic. Transfers overlap with compute;
- memory per device: a tensor lives from its producer's start until the last
  of its local consumers finishes and its outgoing sends are done, holding
  its ``held`` bytes there (its output bytes, or none where the device fuses
  it away: `placer.cost_model.resident_bytes`); a received copy holds its
  output bytes from the start of its transfer until its last consumer there
  finishes. Frees at an instant happen before allocations at it.

Heaps are hand-written over flat arrays because numba's typed containers cost
more than the simulation itself at 10k ops.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from placer.simulator.transfer import link_time, transfer_time

KIND_FINISH = 0
KIND_ARRIVE = 1
KIND_SEND = 2


@njit(cache=True, inline="always")
def _less(ta, ka, tb, kb):
    return ta < tb or (ta == tb and ka < kb)


@njit(cache=True)
def _push(ht, hk, hv, hw, base, size, t, k, v, w):
    """Push (t, k) -> (v, w) into the heap stored at [base, base + size)."""
    i = size
    while i > 0:
        parent = (i - 1) >> 1
        pt, pk = ht[base + parent], hk[base + parent]
        if _less(t, k, pt, pk):
            ht[base + i], hk[base + i] = pt, pk
            hv[base + i], hw[base + i] = hv[base + parent], hw[base + parent]
            i = parent
        else:
            break
    ht[base + i], hk[base + i], hv[base + i], hw[base + i] = t, k, v, w
    return size + 1


@njit(cache=True)
def _pop(ht, hk, hv, hw, base, size):
    """Remove the smallest entry of the heap at [base, base + size); returns the new size."""
    size -= 1
    t, k, v, w = ht[base + size], hk[base + size], hv[base + size], hw[base + size]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and _less(ht[base + c + 1], hk[base + c + 1], ht[base + c], hk[base + c]):
            c += 1
        if _less(ht[base + c], hk[base + c], t, k):
            ht[base + i], hk[base + i] = ht[base + c], hk[base + c]
            hv[base + i], hw[base + i] = hv[base + c], hw[base + c]
            i = c
        else:
            break
    if size > 0:
        ht[base + i], hk[base + i], hv[base + i], hw[base + i] = t, k, v, w
    return size


@njit(cache=True)
def simulate_one(place, times, rank, p_off, p_idx, s_off, s_idx, out_bytes, held, xfer_time, bw, lat,
                 dev_params, start, finish, x_start, x_end, slots, pool, route_off, route_res, res_bw, res_lat):
    """Simulate one placement; fills `start`, `finish`, `x_start`, `x_end`.

    Parameters
    ----------
    place : int64[n] device of each op.
    times : float64[n, D] compute seconds of each op on each device.
    rank : int64[n] topological rank (tie-breaker).
    p_off, p_idx : CSR of distinct producers.
    s_off, s_idx : CSR of distinct consumers.
    out_bytes : float64[n]; xfer_time : float64[n], < 0 where the link model applies.
    held : float64[n, D] bytes op i's output holds on device d when produced there.
    bw, lat : float64[D, D] each route's bottleneck bandwidth and summed latency
        (what a shared pool's thread pays per crossing).
    dev_params : float64[D] weight bytes placed on each device.
    start, finish : float64[n] outputs; x_start, x_end : float64[n, D] outputs
        (-1 where op i sends nothing to device j).
    slots : int64[D] ops a device may run at once (1: the usual device).
    pool : the most ops running at once in the whole cluster (<= 0: no limit).
    route_off, route_res : the route from device d to e is the link directions
        ``route_res[route_off[d * D + e]:route_off[d * D + e + 1]]``.
    res_bw, res_lat : float64[R] bandwidth and latency of each link direction.

    Returns
    -------
    (step_time, busy[D], peak_memory[D], bytes_moved)

    Memory is counted as the loop runs: a tensor copy is allocated when its
    producer starts (or its transfer starts) and carries a count of the reads
    and sends still owed to it; it is freed when that count reaches zero.
    """
    n = place.shape[0]
    D = times.shape[1]
    pending = np.empty(n, dtype=np.int64)
    count = np.zeros(D, dtype=np.int64)
    for i in range(n):
        pending[i] = p_off[i + 1] - p_off[i]
        count[place[i]] += 1
    base = np.zeros(D, dtype=np.int64)
    for d in range(1, D):
        base[d] = base[d - 1] + count[d - 1]
    # per-device ready heaps, flat: key (ready time, rank) -> op
    rt = np.empty(n)
    rk = np.empty(n, dtype=np.int64)
    rv = np.empty(n, dtype=np.int64)
    rw = np.empty(n, dtype=np.int64)
    rsize = np.zeros(D, dtype=np.int64)
    # event heap: key (time, order) -> (op, kind * D + device). Orders: finishes
    # [0, n), arrivals [n, n + nD), transfer starts after both, so that at one
    # instant frees come before the allocations of starting transfers.
    max_sends = 0
    for i in range(n):
        max_sends += min(s_off[i + 1] - s_off[i], D - 1)
    max_running = 0
    for d in range(D):
        max_running += slots[d]
    if pool > 0 and pool < max_running:
        max_running = pool
    cap = max_running + 2 * max_sends + 1
    et = np.empty(cap)
    ek = np.empty(cap, dtype=np.int64)
    ev = np.empty(cap, dtype=np.int64)
    ew = np.empty(cap, dtype=np.int64)
    esize = 0
    running = np.zeros(D, dtype=np.int64)
    running_total = 0
    busy = np.zeros(D)
    link_free = np.zeros(res_bw.shape[0])  # when each link direction is next free
    refs = np.zeros((n, D), dtype=np.int64)  # reads and sends owed to the copy of op i on device d
    cur = np.zeros(D)
    peak = np.zeros(D)
    bytes_moved = 0.0
    sends_now_v = np.empty(max_sends + 1, dtype=np.int64)
    sends_now_d = np.empty(max_sends + 1, dtype=np.int64)
    n_sends_now = 0
    sent_by = np.full(D, -1, dtype=np.int64)  # shared pool: which op last counted a send to device e
    for i in range(n):
        x_start[i, :] = -1.0
        x_end[i, :] = -1.0
        start[i] = -1.0
        finish[i] = -1.0
        if pending[i] == 0:
            d = place[i]
            rsize[d] = _push(rt, rk, rv, rw, base[d], rsize[d], 0.0, rank[i], i, 0)

    now = 0.0
    while True:
        # start ready ops while devices have free slots (and the pool free threads), the op
        # that became ready first first; its output is allocated now
        while pool <= 0 or running_total < pool:
            d = -1
            for e in range(D):
                if running[e] < slots[e] and rsize[e] > 0:
                    if d < 0 or _less(rt[base[e]], rk[base[e]], rt[base[d]], rk[base[d]]):
                        d = e
            if d < 0:
                break
            v = rv[base[d]]
            rsize[d] = _pop(rt, rk, rv, rw, base[d], rsize[d])
            dur_v = times[v, d]
            if pool > 0:  # the thread also hands the output to each other device reading it
                for e in range(s_off[v], s_off[v + 1]):
                    dw = place[s_idx[e]]
                    if dw != d and sent_by[dw] != v:
                        sent_by[dw] = v
                        dur_v += transfer_time(xfer_time, out_bytes, v, lat, bw, d, dw)
            start[v] = now
            finish[v] = now + dur_v
            busy[d] += dur_v
            running[d] += 1
            running_total += 1
            cur[d] += held[v, d]
            if cur[d] > peak[d]:
                peak[d] = cur[d]
            esize = _push(et, ek, ev, ew, 0, esize, finish[v], rank[v], v, KIND_FINISH * D + d)
        if esize == 0:
            break
        now = et[0]
        # handle every event at this instant before dispatching again
        while esize > 0 and et[0] == now:
            v = ev[0]
            kind = ew[0] // D
            d = ew[0] % D
            esize = _pop(et, ek, ev, ew, 0, esize)
            if kind == KIND_FINISH:
                running[d] -= 1
                running_total -= 1
                for e in range(p_off[v], p_off[v + 1]):
                    u = p_idx[e]
                    refs[u, d] -= 1
                    if refs[u, d] == 0:
                        cur[d] -= held[u, d] if place[u] == d else out_bytes[u]
                owed = 0
                for e in range(s_off[v], s_off[v + 1]):
                    w = s_idx[e]
                    dw = place[w]
                    if dw == d:
                        owed += 1
                        pending[w] -= 1
                        if pending[w] == 0:
                            rsize[d] = _push(rt, rk, rv, rw, base[d], rsize[d], now, rank[w], w, 0)
                        continue
                    refs[v, dw] += 1
                    if x_start[v, dw] < 0.0:
                        owed += 1
                        r0, r1 = route_off[d * D + dw], route_off[d * D + dw + 1]
                        s = now
                        route_lat = 0.0
                        route_bw = np.inf
                        for k in range(r0, r1):  # starts when every direction is free; latency, bottleneck
                            r = route_res[k]
                            if link_free[r] > s:
                                s = link_free[r]
                            route_lat += res_lat[r]
                            if res_bw[r] < route_bw:
                                route_bw = res_bw[r]
                        if pool > 0:
                            dur = 0.0  # done by the op's thread, already in its time
                            for k in range(r0, r1):
                                link_free[route_res[k]] = s
                        elif xfer_time[v] >= 0.0:
                            dur = xfer_time[v]
                            for k in range(r0, r1):
                                link_free[route_res[k]] = s + dur
                        else:
                            dur = link_time(route_lat, out_bytes[v], route_bw)
                            for k in range(r0, r1):
                                r = route_res[k]
                                link_free[r] = s + link_time(res_lat[r], out_bytes[v], res_bw[r])
                        x_start[v, dw] = s
                        x_end[v, dw] = s + dur
                        bytes_moved += out_bytes[v]
                        order = n + rank[v] * D + dw
                        esize = _push(et, ek, ev, ew, 0, esize, s + dur, order, v, KIND_ARRIVE * D + dw)
                        if s == now:  # allocated after this instant's frees, without a heap round trip
                            sends_now_v[n_sends_now] = v
                            sends_now_d[n_sends_now] = dw
                            n_sends_now += 1
                        else:
                            esize = _push(et, ek, ev, ew, 0, esize, s, order + n * D, v, KIND_SEND * D + dw)
                refs[v, d] += owed
                if refs[v, d] == 0:
                    cur[d] -= held[v, d]
            elif kind == KIND_SEND:
                cur[d] += out_bytes[v]
                if cur[d] > peak[d]:
                    peak[d] = cur[d]
            else:
                src = place[v]
                refs[v, src] -= 1
                if refs[v, src] == 0:
                    cur[src] -= held[v, src]
                for e in range(s_off[v], s_off[v + 1]):
                    w = s_idx[e]
                    if place[w] == d:
                        pending[w] -= 1
                        if pending[w] == 0:
                            rsize[d] = _push(rt, rk, rv, rw, base[d], rsize[d], now, rank[w], w, 0)
        for k in range(n_sends_now):
            d = sends_now_d[k]
            cur[d] += out_bytes[sends_now_v[k]]
            if cur[d] > peak[d]:
                peak[d] = cur[d]
        n_sends_now = 0

    step_time = 0.0
    for i in range(n):
        if finish[i] > step_time:
            step_time = finish[i]
    for d in range(D):
        peak[d] += dev_params[d]
    return step_time, busy, peak, bytes_moved


@njit(cache=True, parallel=True)
def simulate_batch(places, times, rank, p_off, p_idx, s_off, s_idx, out_bytes, held, xfer_time, bw, lat, params,
                   slots, pool, route_off, route_res, res_bw, res_lat):
    """Simulate K placements (rows of `places`) in parallel; summaries only."""
    K, n = places.shape
    D = times.shape[1]
    steps = np.empty(K)
    busy = np.empty((K, D))
    peaks = np.empty((K, D))
    moved = np.empty(K)
    for k in prange(K):
        place = places[k]
        dev_params = np.zeros(D)
        for i in range(n):
            dev_params[place[i]] += params[i]
        start = np.empty(n)
        finish = np.empty(n)
        x_start = np.empty((n, D))
        x_end = np.empty((n, D))
        s, b, p, mv = simulate_one(place, times, rank, p_off, p_idx, s_off, s_idx, out_bytes, held, xfer_time,
                                   bw, lat, dev_params, start, finish, x_start, x_end, slots, pool,
                                   route_off, route_res, res_bw, res_lat)
        steps[k] = s
        busy[k] = b
        peaks[k] = p
        moved[k] = mv
    return steps, busy, peaks, moved
