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
    topo_rank = problem.graph.topo_rank
    p_off, p_idx = problem.graph.predecessors
    s_off, s_idx = problem.graph.successors
    p_off_l, p_idx_l = p_off.tolist(), p_idx.tolist()
    s_off_l, s_idx_l = s_off.tolist(), s_idx.tolist()
    remaining = np.diff(p_off).tolist()
    data_ready = np.zeros((n, D))  # when op j's inputs can be on each device
    urgent = np.zeros(n)  # when op j's inputs can be on every device
    is_ready = np.zeros(n, dtype=bool)
    is_ready[[i for i in range(n) if remaining[i] == 0]] = True
    free = np.zeros(D)
    last = np.full(D, -1, dtype=np.int64)
    pinned = np.full(problem.num_units, -1, dtype=np.int64)
    assignment = np.full(n, -1, dtype=np.int64)
    start, finish = np.zeros(n), np.full(n, np.nan)  # NaN: not placed yet
    unit = problem.unit
    links = Transfers(problem, assignment, finish)
    reads_from: list[set[int]] = [set() for _ in range(D)]  # ready ops with an input on each device
    stale: set[int] = set()

    def refresh(j: int) -> None:
        row = [links.ready_time(j, d)[0] for d in devs_l]
        data_ready[j, devs] = row
        urgent[j] = max(row)

    for _ in range(n):
        if deadline is not None and deadline.passed():
            break
        R = np.flatnonzero(is_ready)
        units = unit[R]
        pin = pinned[units]
        room = memory.room()[devs]
        need = memory.need(R, units, pin)
        allowed = np.where(pin[:, None] >= 0, pin[:, None] == devs[None, :], need[:, None] <= room[None, :])
        stuck = ~allowed.any(axis=1)
        if stuck.any():  # no device has room: the one with the most, over the estimate
            allowed[np.flatnonzero(stuck), int(np.argmax(room))] = True
        # Lazy greedy: links only get busier, so a stale ready time is a lower bound;
        # refresh the winner until it is fresh, and it is the true earliest pair.
        while True:
            rt = data_ready[R][:, devs]
            est = np.maximum(rt, free[devs][None, :])
            if favorite is not None:
                for c in range(k):
                    d = devs_l[c]
                    f = int(favorite[last[d]]) if last[d] >= 0 else -1
                    if f < 0 or not is_ready[f]:
                        continue
                    row = int(np.searchsorted(R, f))
                    if not allowed[row, c]:
                        continue
                    if rt[row, c] > rt[row][allowed[row]].min():
                        continue  # another device can start f sooner: d is not kept for it
                    f_est = est[row, c]
                    est[:, c] = np.maximum(np.maximum(urgent[R], rt[:, c]), free[d])
                    est[row, c] = f_est
            est[~allowed] = np.inf
            best = est.min()
            tie_r, tie_c = np.nonzero(est <= best)
            if len(tie_r) > 1:
                pick = np.lexsort((tie_c, topo_rank[R[tie_r]], -level[R[tie_r]]))[0]
                tie_r, tie_c = tie_r[pick:pick + 1], tie_c[pick:pick + 1]
            chosen = int(R[tie_r[0]])
            if chosen not in stale:
                break
            stale.discard(chosen)
            refresh(chosen)
        i, d = int(R[tie_r[0]]), int(devs[tie_c[0]])
        arrival, senders = links.ready_time(i, d, commit=True)
        t = max(float(free[d]), arrival)
        assignment[i], start[i], finish[i] = d, t, t + times[i, d]
        free[d] = finish[i]
        last[d] = i
        is_ready[i] = False
        for m in p_idx_l[p_off_l[i]:p_off_l[i + 1]]:
            reads_from[int(assignment[m])].discard(i)
        stale.discard(i)
        for q in senders:  # routes from these devices are busier now: ready times over them may grow
            stale.update(reads_from[q])
        u = int(unit[i])
        new_unit = None
        if pinned[u] < 0:
            pinned[u] = d
            new_unit = u
        memory.place(i, d, new_unit, assignment)
        for j in s_idx_l[s_off_l[i]:s_off_l[i + 1]]:
            remaining[j] -= 1
            if remaining[j] == 0:
                is_ready[j] = True
                for m in p_idx_l[p_off_l[j]:p_off_l[j + 1]]:
                    reads_from[int(assignment[m])].add(j)
                refresh(j)
    capped = place_rest(problem, memory, assignment, pinned, devs)
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
