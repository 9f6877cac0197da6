"""`m_topo`, `m_etf`, `m_sct`: the memory-constrained placers of Baechi (Jeon et al., SoCC 2020).

All three spread ops over the GPUs (every device when there is none), never
put an op where the memory estimate says it does not fit (m-ETF and m-SCT:
`LiveMemory` along their schedule; see `placer.placers.common`), and fall back to the device with the most room
only when no device has any (``meta["memory_estimate_exceeded"]``). Like
Baechi's co-placement, m-ETF and m-SCT first fuse chains into one unit
(`placer.placers.common.chain_units`), but stricter: Baechi's grouper joins
an op with one consumer to that consumer whatever its other inputs; here the
consumer must also have that op as only input: Baechi's rule made m-ETF and
m-SCT slower on most bundled graphs (docs/placers.md), so the stricter rule stays; m-TOPO
does not fuse, since a fused chain would defeat its even memory shares.

- **m-TOPO**: units in topological order fill one device after another, each
  up to an even share of the total static memory (total / k + the largest
  unit), as Baechi's ``TopoUniform``; the simulator then checks the fit.
- **m-ETF**: Earliest Task First list scheduling (Hwang et al., SIAM J.
  Comput. 1989): repeatedly start the (ready op, device) pair that can start
  earliest, given when the device is free and when the op's inputs can
  arrive there; ties go to the op with the larger static level (longest
  compute path to an exit).
- **m-SCT**: Small Communication Time scheduling (Hanen and Munier 1995).
  A linear program picks each op's *favourite child*: minimise the makespan
  ``w`` over start times ``s`` and edge variables ``x_ij`` in [0, 1], with
  ``s_i + p_i + c_ij x_ij <= s_j`` on every edge, ``s_i + p_i <= w``, at most
  one favourite child per op (``sum_j x_ij >= outdeg(i) - 1``) and at most one
  favourite parent per op (``sum_i x_ij >= indeg(j) - 1``). The relaxation is
  solved with SciPy's HiGHS (Baechi used MOSEK) and rounded: ``x_ij < 1/2``
  makes j the favourite child of i (conflicts resolved by smallest ``x``).
  Scheduling is ETF, except that a device that just ran op i and is the
  earliest place for i's favourite child waits for that child, running
  meanwhile only *urgent* ops (ops whose inputs have reached every device).
"""

from __future__ import annotations

from typing import Annotated

import numpy as np

from placer.cluster import Cluster
from placer.dag import upward_ranks
from placer.graph import OpGraph
from placer.placement import Placement
from placer.placers.common import LiveMemory, MemoryLedger, Problem, expand_units, fit_to_memory
from placer.placers.etf_queue import ColumnQueue
from placer.placers.heft import Schedule
from placer.placers.options import Option
from placer.placers.registry import register
from placer.placers.routes import Transfers, route_mapping
from placer.placers.time_cap import TIME_LIMIT_SECONDS, Deadline, TimeLimit, capped_meta, place_rest


# -- m-TOPO -------------------------------------------------------------------
@register("m_topo", description="Baechi m-TOPO: topological order fills each GPU up to an even memory share")
def place_m_topo(graph: OpGraph, cluster: Cluster) -> Placement:
    """Fill devices in topological order up to total memory / k + the largest unit each.

    The share balances Baechi's static memory (weights + outputs); on a
    topology the filled devices then swap by `route_mapping` (neighbouring
    shares on GPUs whose routes share few links); whether the result fits is
    then checked with the simulator (`fit_to_memory`).
    """
    problem = Problem.build(graph, cluster)
    devices = problem.candidates
    share = problem.unit_memory.sum() / len(devices) + problem.unit_memory.max()
    shares = MemoryLedger(problem, limit=np.full(problem.num_devices, share))
    unit_device = np.empty(problem.num_units, dtype=np.int64)
    k = 0
    for u in range(problem.num_units):
        while k < len(devices) - 1 and not shares.fits(u, int(devices[k])):
            k += 1
        d = int(devices[k])
        shares.charge(u, d)
        unit_device[u] = d
    unit_device = route_mapping(problem, unit_device, devices)[unit_device]
    unit_device, ledger = fit_to_memory(problem, unit_device, devices)
    return problem.placement(expand_units(problem, unit_device), "m_topo", ledger, memory_share=float(share))


# -- m-ETF and m-SCT: one list scheduler ----------------------------------------
def list_schedule(problem: Problem, devices: np.ndarray, memory: LiveMemory,
                  favorite: np.ndarray | None = None, deadline: Deadline | None = None) -> Schedule:
    """ETF list scheduling over `devices`; with `favorite` (child per op, -1: none), SCT.

    Each step starts the (ready op, device) pair with the least earliest
    start; ties go to the larger static level, then the smaller topological
    rank, then the earlier device in `devices`. Each device keeps its ready
    ops in `ColumnQueue` heaps (`placer.placers.etf_queue`), so a step costs
    O(k log n) per op it looks at (the winner and each stale op refreshed
    before it), not a scan of every ready op.

    Parameters
    ----------
    problem : the compiled graph and cluster.
    devices : the devices to use.
    memory : live-memory account; a device without room for an op is not offered.
    favorite : favourite child of each op (SCT), or None for plain ETF.
    deadline : past it, the ops left are placed by the time cap's quick rule
        (`placer.placers.time_cap`); None: no cap.

    Returns
    -------
    Schedule
        The scheduler's own device, start and finish per op, with transfers
        serialised per link direction on their routes (`Transfers`).
    """
    n, D = problem.num_ops, problem.num_devices
    devs = np.asarray(devices, dtype=np.int64)
    devs_l = devs.tolist()
    k = len(devs)
    times = problem.times
    level = upward_ranks(problem.graph, times[:, devs].mean(axis=1))  # static level: no transfers
    neg_level = (-level).tolist()
    topo = problem.graph.topo_rank.tolist()
    p_off, p_idx = problem.graph.predecessors
    s_off, s_idx = problem.graph.successors
    p_off_l, p_idx_l = p_off.tolist(), p_idx.tolist()
    s_off_l, s_idx_l = s_off.tolist(), s_idx.tolist()
    remaining = np.diff(p_off).tolist()
    unit = problem.unit
    unit_l = unit.tolist()
    need = (problem.out_bytes + memory.unit_params[unit]).tolist()  # while the op's unit is unpinned
    favorite_l = favorite.tolist() if favorite is not None else None
    data_ready: list[list[float]] = [[0.0] * k for _ in range(n)]  # when op j's inputs can be on each device
    urgent = [0.0] * n  # when op j's inputs can be on every device
    is_ready = [False] * n
    version = [0] * n
    free = [0.0] * D
    last = [-1] * D
    pinned = [-1] * problem.num_units
    unit_ready: list[list[int]] = [[] for _ in range(problem.num_units)]  # ready ops of each unpinned unit
    assignment = np.full(n, -1, dtype=np.int64)
    assignment_l = [-1] * n
    start, finish = np.zeros(n), np.full(n, np.nan)  # NaN: not placed yet
    links = Transfers(problem, assignment, finish)
    reads_from: list[set[int]] = [set() for _ in range(D)]  # ready ops with an input on each device
    stale: set[int] = set()
    # by inputs on the device; for m-SCT also by inputs on every device (on a device kept for a favourite)
    by_device = [ColumnQueue(c, devs_l[c], version, pinned, unit_l, need) for c in range(k)]
    by_every = [ColumnQueue(c, devs_l[c], version, pinned, unit_l, need) for c in range(k)] if favorite_l else None

    def enqueue(j: int) -> None:
        """Push op j's current values into the queues of the devices it may go to."""
        version[j] += 1
        row, nl, tp = data_ready[j], neg_level[j], topo[j]
        p = pinned[unit_l[j]]
        for c in (range(k) if p < 0 else (devs_l.index(p),)):
            f = free[devs_l[c]]
            by_device[c].push(row[c], nl, tp, j, f)
            if by_every is not None:
                u = urgent[j]
                by_every[c].push(row[c] if row[c] > u else u, nl, tp, j, f)

    def refresh(j: int) -> None:
        row = links.ready_row(j, devs)
        data_ready[j] = row
        urgent[j] = max(row)
        enqueue(j)

    def may_go(j: int, c: int) -> bool:
        p = pinned[unit_l[j]]
        return p == devs_l[c] if p >= 0 else (c == roomiest or need[j] <= room[c])

    def kept_for(c: int) -> int:
        """The favourite child device c waits for (m-SCT), or -1: the ready favourite of the op c ran
        last, if c may take it and no device it may go to has its inputs sooner."""
        d = devs_l[c]
        if favorite_l is None or last[d] < 0:
            return -1
        f = favorite_l[last[d]]
        if f < 0 or not is_ready[f] or not may_go(f, c):
            return -1
        row = data_ready[f]
        return f if row[c] <= min(row[c2] for c2 in range(k) if may_go(f, c2)) else -1

    def column_best(c: int) -> tuple | None:
        """The least (est, -level, topo_rank, c, op) on column c (None: no op may go there)."""
        d = devs_l[c]
        f = kept[c]
        if f < 0:
            return by_device[c].best(free[d], room[c], c == roomiest)
        # d waits for f: the others start once their inputs can be on every device
        cand = by_every[c].best(free[d], room[c], c == roomiest, exclude=f)
        rt = data_ready[f][c]
        f_key = (rt if rt > free[d] else free[d], neg_level[f], topo[f], c, f)
        return f_key if cand is None or f_key < cand else cand

    def key_on(j: int, c: int) -> tuple:
        """Op j's key on column c, which may take it and does not wait for it."""
        F = free[devs_l[c]]
        v = data_ready[j][c]
        if kept[c] >= 0:
            u = urgent[j]
            v = v if v > u else u
        return (v if v > F else F, neg_level[j], topo[j], c, j)

    for j in range(n):
        if remaining[j] == 0:
            is_ready[j] = True
            unit_ready[unit_l[j]].append(j)
            enqueue(j)
    for _ in range(n):
        if deadline is not None and deadline.passed():
            break
        room = memory.room()[devs].tolist()
        roomiest = room.index(max(room))  # an op that fits no device may go here (over the estimate)
        kept = [kept_for(c) for c in range(k)]
        cands = [column_best(c) for c in range(k)]
        # Lazy greedy: links only get busier, so a stale ready time is a lower bound;
        # refresh the winner until it is fresh, and it is the true earliest pair.
        while True:
            best = min(cand for cand in cands if cand is not None)
            chosen = best[4]
            if chosen not in stale:
                break
            stale.discard(chosen)
            refresh(chosen)
            # only the chosen op's times moved: a column changes where it was the best or the favourite
            for c in range(k):
                cand = cands[c]
                if favorite_l is not None and last[devs_l[c]] >= 0 and favorite_l[last[devs_l[c]]] == chosen:
                    kept[c] = kept_for(c)
                    cands[c] = column_best(c)
                elif cand is not None and cand[4] == chosen:
                    cands[c] = column_best(c)
                elif may_go(chosen, c):
                    key = key_on(chosen, c)
                    if cand is None or key < cand:
                        cands[c] = key
        i, d = chosen, devs_l[best[3]]
        arrival, senders = links.ready_time(i, d, commit=True)
        t = max(free[d], arrival)
        assignment[i] = assignment_l[i] = d
        start[i], finish[i] = t, t + times[i, d]
        free[d] = float(finish[i])
        last[d] = i
        is_ready[i] = False
        version[i] += 1  # its queued entries are void
        for m in p_idx_l[p_off_l[i]:p_off_l[i + 1]]:
            reads_from[assignment_l[m]].discard(i)
        stale.discard(i)
        for q in senders:  # routes from these devices are busier now: ready times over them may grow
            stale.update(reads_from[q])
        u = unit_l[i]
        new_unit = None
        if pinned[u] < 0:
            pinned[u] = d
            new_unit = u
            for j in unit_ready[u]:  # now only d may take them, whatever its room
                if is_ready[j]:
                    enqueue(j)
            unit_ready[u] = []
        memory.place(i, d, new_unit, assignment)
        for j in s_idx_l[s_off_l[i]:s_off_l[i + 1]]:
            remaining[j] -= 1
            if remaining[j] == 0:
                is_ready[j] = True
                if pinned[unit_l[j]] < 0:
                    unit_ready[unit_l[j]].append(j)
                for m in p_idx_l[p_off_l[j]:p_off_l[j + 1]]:
                    reads_from[assignment_l[m]].add(j)
                refresh(j)
    pinned_a = np.array(pinned, dtype=np.int64)
    capped = place_rest(problem, memory, assignment, pinned_a, devs)
    start[np.isnan(finish)] = np.nan
    return Schedule(assignment, start, finish, capped_meta(deadline, capped), capped)


FOLLOW_FORWARD = Option("place only forward ops; each gradient op follows its forward op (Baechi's "
                        "forward-operator-based placement)")


@register("m_etf", description="Baechi m-ETF: earliest-task-first list scheduling under GPU memory limits")
def place_m_etf(graph: OpGraph, cluster: Cluster, *,
                follow_forward: Annotated[bool, FOLLOW_FORWARD] = False,
                time_limit: TimeLimit = TIME_LIMIT_SECONDS) -> Placement:
    """Memory-constrained ETF over the GPUs; see the module docstring.

    `follow_forward`: place only forward ops and let each gradient op follow
    its forward op (Baechi's forward-operator-based placement,
    `placer.placers.common.forward_units`). `time_limit`: the time cap
    (`placer.placers.time_cap`).
    """
    deadline = Deadline(time_limit)
    problem = Problem.build(graph, cluster, fuse_chains=True, follow_forward=follow_forward)
    memory = LiveMemory(problem)
    schedule = list_schedule(problem, problem.candidates, memory, deadline=deadline)
    return problem.placement(schedule.assignment, "m_etf", memory, **schedule.meta())


# -- m-SCT's favourite children -----------------------------------------------------
def _at_most_one_favorite(end: np.ndarray, degree: np.ndarray, first_row: int):
    """LP rows ``-sum x_e <= 1 - degree(k)``, one per op k with `degree` >= 2, over the edges e at k.

    With x_e = 0 meaning "favourite", an op keeps at most one favourite edge at
    that end. `end` is each edge's op at that end (its source for favourite
    children, its destination for favourite parents); rows are numbered from
    `first_row`. Returns the (rows, columns, values) of the entries and the rows' bounds.
    """
    edges = np.flatnonzero(degree[end] >= 2)
    ops = np.flatnonzero(degree >= 2)
    row_of = np.full(len(degree), -1)
    row_of[ops] = first_row + np.arange(len(ops))
    return row_of[end[edges]], edges, -np.ones(len(edges)), 1.0 - degree[ops]


def favorite_children(problem: Problem, devices: np.ndarray, time_limit: float = 60.0) -> tuple[np.ndarray, dict]:
    """Favourite child of each op (-1: none) from the rounded LP relaxation.

    Returns the favourites and facts about the solve (``lp_status``,
    ``lp_makespan`` in seconds, ``lp_seconds``). If HiGHS runs out of
    `time_limit` seconds, its best solution so far is rounded; without one,
    no op has a favourite child (the schedule is then m-ETF's) and
    ``lp_status`` says so.
    """
    import time

    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix

    n = problem.num_ops
    p_off, p_idx = problem.graph.predecessors
    src = p_idx
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(p_off))
    E = len(src)
    favorite = np.full(n, -1, dtype=np.int64)
    if E == 0:
        return favorite, {"lp_status": "no edges"}
    p = problem.times[:, devices].mean(axis=1)
    c = problem.mean_comm_time(devices)
    scale = float(p.mean()) or 1.0  # times near 1 keep HiGHS's tolerances meaningful
    p, c = p / scale, c / scale
    S, W = E, E + n  # variable layout: x (E), s (n), w
    rows, cols, vals, rhs = [], [], [], []
    # s_i + p_i + c_i x_ij <= s_j
    e = np.arange(E)
    rows += [e, e, e]
    cols += [S + src, S + dst, e]
    vals += [np.ones(E), -np.ones(E), c[src]]
    rhs.append(-p[src])
    r0 = E
    # at most one favourite child: -sum_j x_ij <= 1 - outdeg(i), for outdeg >= 2;
    # at most one favourite parent: -sum_i x_ij <= 1 - indeg(j), for indeg >= 2
    outdeg = np.bincount(src, minlength=n)
    for end, degree in ((src, outdeg), (dst, np.diff(p_off))):
        at_rows, at_cols, at_vals, bound = _at_most_one_favorite(end, degree, r0)
        rows.append(at_rows)
        cols.append(at_cols)
        vals.append(at_vals)
        rhs.append(bound)
        r0 += len(bound)
    # s_i + p_i <= w for the exits (the edges carry it to every other op)
    exits = np.flatnonzero(outdeg == 0)
    rr = r0 + np.arange(len(exits))
    rows += [rr, rr]
    cols += [S + exits, np.full(len(exits), W)]
    vals += [np.ones(len(exits)), -np.ones(len(exits))]
    rhs.append(-p[exits])
    r0 += len(exits)
    A = coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                   shape=(r0, W + 1)).tocsr()
    objective = np.zeros(W + 1)
    objective[W] = 1.0
    bounds = [(0.0, 1.0)] * E + [(0.0, None)] * (n + 1)
    t0 = time.perf_counter()
    res = linprog(objective, A_ub=A, b_ub=np.concatenate(rhs), bounds=bounds, method="highs",
                  options={"time_limit": float(time_limit)})
    info = {"lp_status": res.message, "lp_seconds": time.perf_counter() - t0}
    if res.x is None:  # out of time before any solution: schedule without favourites (plain ETF)
        info["lp_status"] = f"{res.message}; no favourite children, scheduled as m-ETF"
        info["favorite_children"] = 0
        return favorite, info
    info["lp_makespan"] = float(res.x[W]) * scale
    x = res.x[:E]
    # rounding: x < 1/2 marks a favourite edge; keep the most certain ones first
    has_parent = np.zeros(n, dtype=bool)
    for edge in np.argsort(x, kind="stable").tolist():
        if x[edge] >= 0.5:
            break
        i, j = int(src[edge]), int(dst[edge])
        if favorite[i] < 0 and not has_parent[j]:
            favorite[i] = j
            has_parent[j] = True
    info["favorite_children"] = int((favorite >= 0).sum())
    return favorite, info


@register("m_sct", description="Baechi m-SCT: favourite-child LP (HiGHS) + small-communication-time scheduling")
def place_m_sct(graph: OpGraph, cluster: Cluster, *,
                lp_time_limit: Annotated[float, Option("seconds the favourite-child LP may take; past it, "
                                                       "scheduled as m-ETF", ge=0)] = 60.0,
                follow_forward: Annotated[bool, FOLLOW_FORWARD] = False,
                time_limit: TimeLimit = TIME_LIMIT_SECONDS) -> Placement:
    """Memory-constrained SCT over the GPUs; see the module docstring.

    `lp_time_limit` bounds the favourite-child LP, and so does what is left of
    `time_limit`, the time cap of the whole placer (`placer.placers.time_cap`);
    `follow_forward` as for `place_m_etf`.
    """
    deadline = Deadline(time_limit)
    problem = Problem.build(graph, cluster, fuse_chains=True, follow_forward=follow_forward)
    favorite, info = favorite_children(problem, problem.candidates, min(lp_time_limit, deadline.left()))
    memory = LiveMemory(problem)
    schedule = list_schedule(problem, problem.candidates, memory, favorite=favorite, deadline=deadline)
    return problem.placement(schedule.assignment, "m_sct", memory, **info, **schedule.meta())
