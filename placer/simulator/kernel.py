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

Memory layout (why the loop is shaped as it is): at 100k ops the loop's time
is mostly cache misses on the state of ops it touches out of order (the
producers a backward op reads, the consumers a transfer wakes), so

- ops are numbered by topological rank inside the loop ("rank space"): the
  rank is the tie-breaker, so an event's key alone names its op;
- a heap entry is only its key, a (time, order) pair side by side in one
  float64 array;
- what the loop reads and writes of an op sits in one 64-byte record per op,
  aligned to a cache line (`REC`), and the record of the next events' ops is
  prefetched while the current event is handled;
- transfers are recorded as a list, not as [n, D] tables.

None of this changes an answer: the same events happen in the same order with
the same arithmetic.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from placer.simulator.transfer import link_time, transfer_time

REC = 8
"""int64 slots of an op's record: the ints device, inputs still pending, reads and sends still owed to
its output on its own device, first entry of its consumers and of its producers in the CSRs; the floats
(same buffer, viewed as float64) bytes its output holds on its device, its output bytes, its seconds."""
R_DEV, R_PENDING, R_OWED, R_SUCC, R_PRED, R_HELD, R_BYTES, R_DUR = range(REC)


@intrinsic
def _prefetch(typingctx, arr, idx):
    """Ask the CPU to start loading ``arr[idx]`` into the cache (a hint: no effect on any value)."""
    if not isinstance(arr, types.Array) or not isinstance(idx, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
                                            "llvm.prefetch.p0")
        # read, keep in all cache levels, data cache
        builder.call(fn, [builder.bitcast(builder.gep(ary.data, [args[1]]), i8p), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return types.none(arr, idx), codegen


@njit(cache=True, inline="always")
def _less(ta, ka, tb, kb):
    return ta < tb or (ta == tb and ka < kb)


@njit(cache=True)
def _push(h, base, size, t, k):
    """Push key (t, k) into the heap of pairs stored at h[2 * base:2 * (base + size)]; returns the new size."""
    i = size
    while i > 0:
        parent = (i - 1) >> 1
        pt, pk = h[2 * (base + parent)], h[2 * (base + parent) + 1]
        if _less(t, k, pt, pk):
            h[2 * (base + i)], h[2 * (base + i) + 1] = pt, pk
            i = parent
        else:
            break
    h[2 * (base + i)], h[2 * (base + i) + 1] = t, k
    return size + 1


@njit(cache=True)
def _pop(h, base, size):
    """Remove the smallest key of the heap at h[2 * base:2 * (base + size)]; returns the new size."""
    size -= 1
    last = 2 * (base + size)
    t, k = h[last], h[last + 1]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        jc = 2 * (base + c)
        if c + 1 < size and _less(h[jc + 2], h[jc + 3], h[jc], h[jc + 1]):
            c += 1
            jc += 2
        if _less(h[jc], h[jc + 1], t, k):
            h[2 * (base + i)], h[2 * (base + i) + 1] = h[jc], h[jc + 1]
            i = c
        else:
            break
    if size > 0:
        h[2 * (base + i)], h[2 * (base + i) + 1] = t, k
    return size


@njit(cache=True)
def simulate_one(place, order, times, p_off, p_idx, s_off, s_idx, out_bytes, held, xfer_time, bw, lat,
                 dev_params, start, finish, slots, pool, route_off, route_res, res_bw, res_lat, cutoff=np.inf):
    """Simulate one placement; fills `start` and `finish`.

    The loop numbers ops by topological rank (rank space, as the module's
    docstring says): `place`, `start`, `finish` and the returned ``send_op``
    are in graph order, every other per-op input in rank order
    (`placer.simulator.core.Simulator` prepares them).

    Parameters
    ----------
    place : int64[n] device of each op (graph order).
    order : int64[n] the op (graph index) of each rank (`placer.graph.OpGraph.topo_order`).
    times : float64[n, D] compute seconds of each op on each device.
    p_off, p_idx : CSR of distinct producers (ranks).
    s_off, s_idx : CSR of distinct consumers (ranks).
    out_bytes : float64[n]; xfer_time : float64[n], < 0 where the link model applies.
    held : float64[n, D] bytes op i's output holds on device d when produced there.
    bw, lat : float64[D, D] each route's bottleneck bandwidth and summed latency
        (what a shared pool's thread pays per crossing).
    dev_params : float64[D] weight bytes placed on each device.
    start, finish : float64[n] outputs (graph order).
    slots : int64[D] ops a device may run at once (1: the usual device).
    pool : the most ops running at once in the whole cluster (<= 0: no limit).
    route_off, route_res : the route from device d to e is the link directions
        ``route_res[route_off[d * D + e]:route_off[d * D + e + 1]]``.
    res_bw, res_lat : float64[R] bandwidth and latency of each link direction.
    cutoff : stop early, with step time ``inf``, once the step is sure to end after `cutoff` seconds: when
        an op starts at ``now`` on device d, the step cannot end before ``now`` + the seconds of d's ops
        not yet started / d's slots (inf: always simulate to the end).

    Returns
    -------
    (step_time, busy[D], peak_memory[D], bytes_moved, send_op, send_dev, send_start, send_end):
    the last four, one entry per transfer in the order they were asked for (``send_op`` in graph order).

    Memory is counted as the loop runs: a tensor copy is allocated when its
    producer starts (or its transfer starts) and carries a count of the reads
    and sends still owed to it; it is freed when that count reaches zero.

    The per-op inputs are gathered first into one record per op (`REC`; the
    module's docstring says why).
    """
    n = place.shape[0]
    D = times.shape[1]
    # per-op records: ints and floats in one buffer, fields at R_* (record n: the CSRs' ends)
    buf = np.empty(REC * (n + 2), dtype=np.int64)
    skip = (64 - buf.ctypes.data % 64) % 64 // 8  # a record per cache line, not across two
    rec = buf[skip:skip + REC * (n + 1)]
    recf = rec.view(np.float64)
    count = np.zeros(D, dtype=np.int64)
    left = np.zeros(D)  # seconds of each device's ops not yet started (the cutoff's bound)
    max_sends = 0
    for r in range(n):
        d = place[order[r]]
        at = REC * r
        rec[at + R_DEV] = d
        rec[at + R_PENDING] = p_off[r + 1] - p_off[r]
        rec[at + R_OWED] = 0
        rec[at + R_SUCC] = s_off[r]
        rec[at + R_PRED] = p_off[r]
        recf[at + R_HELD] = held[r, d]
        recf[at + R_BYTES] = out_bytes[r]
        recf[at + R_DUR] = times[r, d]
        left[d] += times[r, d]
        count[d] += 1
        max_sends += min(s_off[r + 1] - s_off[r], D - 1)
    rec[REC * n + R_SUCC] = s_off[n]
    rec[REC * n + R_PRED] = p_off[n]
    base = np.zeros(D, dtype=np.int64)
    for d in range(1, D):
        base[d] = base[d - 1] + count[d - 1]
    # per-device ready heaps, flat: keys (ready time, rank)
    rh = np.empty(2 * n)
    rsize = np.zeros(D, dtype=np.int64)
    # event heap: keys (time, order); the order names the event. Finishes: rank
    # [0, n); arrivals of op v on device e: n + v * D + e; transfer starts:
    # the same + nD, after both, so that at one instant frees come before the
    # allocations of starting transfers.
    max_running = 0
    for d in range(D):
        max_running += slots[d]
    if pool > 0 and pool < max_running:
        max_running = pool
    cap = max_running + 2 * max_sends + 1
    eh = np.empty(2 * cap)
    esize = 0
    arrive0 = n
    send0 = n + n * D
    running = np.zeros(D, dtype=np.int64)
    running_total = 0
    busy = np.zeros(D)
    link_free = np.zeros(res_bw.shape[0])  # when each link direction is next free
    # reads owed to the copy of op v received on device d, [v * D + d] (set when the copy is sent)
    copy_refs = np.empty(n * D, dtype=np.int32)
    send_op = np.empty(max_sends, dtype=np.int64)
    send_dev = np.empty(max_sends, dtype=np.int64)
    send_start = np.empty(max_sends)
    send_end = np.empty(max_sends)
    n_sends = 0
    cur = np.zeros(D)
    peak = np.zeros(D)
    bytes_moved = 0.0
    sends_now_v = np.empty(max_sends + 1, dtype=np.int64)
    sends_now_d = np.empty(max_sends + 1, dtype=np.int64)
    n_sends_now = 0
    sent_by = np.full(D, -1, dtype=np.int64)  # shared pool: which op last counted a send to device e
    copied_by = np.full(D, -1, dtype=np.int64)  # which finished op last sent its output to device e
    t_start = np.full(n, -1.0)
    t_finish = np.full(n, -1.0)
    for r in range(n):
        if rec[REC * r + R_PENDING] == 0:
            d = rec[REC * r + R_DEV]
            rsize[d] = _push(rh, base[d], rsize[d], 0.0, r)

    # a relative margin, so that rounding in `left` never stops a step that ends exactly at the cutoff;
    # without a cutoff (the reward loop) nothing is checked
    screening = cutoff < np.inf
    stop_after = cutoff * (1.0 + 1e-9)
    stopped = False
    now = 0.0
    while not stopped:
        # start ready ops while devices have free slots (and the pool free threads), the op
        # that became ready first first; its output is allocated now
        while pool <= 0 or running_total < pool:
            d = -1
            for e in range(D):
                if running[e] < slots[e] and rsize[e] > 0:
                    if d < 0 or _less(rh[2 * base[e]], rh[2 * base[e] + 1], rh[2 * base[d]], rh[2 * base[d] + 1]):
                        d = e
            if d < 0:
                break
            v = np.int64(rh[2 * base[d] + 1])
            rsize[d] = _pop(rh, base[d], rsize[d])
            dur_v = recf[REC * v + R_DUR]
            if screening:
                if now + left[d] / slots[d] > stop_after:
                    stopped = True
                    break
                left[d] -= dur_v
            if pool > 0:  # the thread also hands the output to each other device reading it
                for e in range(rec[REC * v + R_SUCC], rec[REC * (v + 1) + R_SUCC]):
                    dw = rec[REC * s_idx[e] + R_DEV]
                    if dw != d and sent_by[dw] != v:
                        sent_by[dw] = v
                        dur_v += transfer_time(xfer_time, out_bytes, v, lat, bw, d, dw)
            t_start[v] = now
            t_finish[v] = now + dur_v
            busy[d] += dur_v
            running[d] += 1
            running_total += 1
            cur[d] += recf[REC * v + R_HELD]
            if cur[d] > peak[d]:
                peak[d] = cur[d]
            esize = _push(eh, 0, esize, t_finish[v], v)
        if esize == 0 or stopped:
            break
        now = eh[0]
        # handle every event at this instant before dispatching again
        while esize > 0 and eh[0] == now:
            key = np.int64(eh[1])
            esize = _pop(eh, 0, esize)
            if esize > 0:  # the next event's op: load its record while this one is handled
                nxt = np.int64(eh[1])
                if nxt >= send0:
                    nxt = (nxt - send0) // D
                elif nxt >= arrive0:
                    nxt = (nxt - arrive0) // D
                _prefetch(rec, REC * nxt)
            if key < arrive0:
                v = key
                at = REC * v
                d = rec[at + R_DEV]
                running[d] -= 1
                running_total -= 1
                for e in range(rec[at + R_PRED], rec[at + REC + R_PRED]):
                    u = p_idx[e]
                    if rec[REC * u + R_DEV] == d:
                        rec[REC * u + R_OWED] -= 1
                        if rec[REC * u + R_OWED] == 0:
                            cur[d] -= recf[REC * u + R_HELD]
                    else:
                        copy_refs[u * D + d] -= 1
                        if copy_refs[u * D + d] == 0:
                            cur[d] -= recf[REC * u + R_BYTES]
                owed = 0
                nbytes = recf[at + R_BYTES]
                for e in range(rec[at + R_SUCC], rec[at + REC + R_SUCC]):
                    w = s_idx[e]
                    dw = rec[REC * w + R_DEV]
                    if dw == d:
                        owed += 1
                        rec[REC * w + R_PENDING] -= 1
                        if rec[REC * w + R_PENDING] == 0:
                            rsize[d] = _push(rh, base[d], rsize[d], now, w)
                        continue
                    if copied_by[dw] == v:
                        copy_refs[v * D + dw] += 1
                        continue
                    copied_by[dw] = v
                    copy_refs[v * D + dw] = 1
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
                        dur = link_time(route_lat, nbytes, route_bw)
                        for k in range(r0, r1):
                            r = route_res[k]
                            link_free[r] = s + link_time(res_lat[r], nbytes, res_bw[r])
                    send_op[n_sends] = v
                    send_dev[n_sends] = dw
                    send_start[n_sends] = s
                    send_end[n_sends] = s + dur
                    n_sends += 1
                    bytes_moved += nbytes
                    key = arrive0 + v * D + dw
                    esize = _push(eh, 0, esize, s + dur, key)
                    if s == now:  # allocated after this instant's frees, without a heap round trip
                        sends_now_v[n_sends_now] = v
                        sends_now_d[n_sends_now] = dw
                        n_sends_now += 1
                    else:
                        esize = _push(eh, 0, esize, s, key + n * D)
                rec[at + R_OWED] += owed
                if rec[at + R_OWED] == 0:
                    cur[d] -= recf[at + R_HELD]
            elif key >= send0:
                key -= send0
                v = key // D
                d = key - v * D
                cur[d] += recf[REC * v + R_BYTES]
                if cur[d] > peak[d]:
                    peak[d] = cur[d]
            else:
                key -= arrive0
                v = key // D
                d = key - v * D
                at = REC * v
                src = rec[at + R_DEV]
                rec[at + R_OWED] -= 1
                if rec[at + R_OWED] == 0:
                    cur[src] -= recf[at + R_HELD]
                for e in range(rec[at + R_SUCC], rec[at + REC + R_SUCC]):
                    w = s_idx[e]
                    if rec[REC * w + R_DEV] == d:
                        rec[REC * w + R_PENDING] -= 1
                        if rec[REC * w + R_PENDING] == 0:
                            rsize[d] = _push(rh, base[d], rsize[d], now, w)
        for k in range(n_sends_now):
            d = sends_now_d[k]
            cur[d] += recf[REC * sends_now_v[k] + R_BYTES]
            if cur[d] > peak[d]:
                peak[d] = cur[d]
        n_sends_now = 0

    step_time = np.inf if stopped else 0.0
    for r in range(n):
        if t_finish[r] > step_time:
            step_time = t_finish[r]
        start[order[r]] = t_start[r]
        finish[order[r]] = t_finish[r]
    for k in range(n_sends):
        send_op[k] = order[send_op[k]]
    for d in range(D):
        peak[d] += dev_params[d]
    return (step_time, busy, peak, bytes_moved,
            send_op[:n_sends], send_dev[:n_sends], send_start[:n_sends], send_end[:n_sends])


@njit(cache=True, parallel=True, nogil=True)
def simulate_batch(places, order, times, p_off, p_idx, s_off, s_idx, out_bytes, held, xfer_time, bw, lat, params,
                   slots, pool, route_off, route_res, res_bw, res_lat, cutoff=np.inf):
    """Simulate K placements (rows of `places`, graph order) in parallel; summaries only. Without the GIL, so
    a caller may simulate in one thread while it prepares the next placements in another.

    The other arguments are `simulate_one`'s, in rank space; `params` (graph order) are each op's weight bytes.
    """
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
        s, b, p, mv, _, _, _, _ = simulate_one(place, order, times, p_off, p_idx, s_off, s_idx, out_bytes, held,
                                               xfer_time, bw, lat, dev_params, start, finish, slots, pool,
                                               route_off, route_res, res_bw, res_lat, cutoff)
        steps[k] = s
        busy[k] = b
        peaks[k] = p
        moved[k] = mv
    return steps, busy, peaks, moved
