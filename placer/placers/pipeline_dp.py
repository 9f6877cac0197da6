"""`pipeline_dp`: the throughput-optimal pipeline split, by dynamic programming over ideals.

Pipeline parallelism (PipeDream, GPipe) gives each device a contiguous piece
of the graph and streams micro-batches through them; throughput is set by the
busiest device (`placer.objectives`, ``throughput``). Following Tarnawski et
al. (NeurIPS 2020), a contiguous piece is the difference of two ideals of the
unit DAG (`placer.placers.pipeline_units`), and

    dp[devices left][ideal I] = min over sub-ideals J of I and device classes c
                                max(dp[devices left - one of c][J], load_c(I \\ J))

is solved exactly: loads count compute and the MSR communication rule, a
piece must fit the device's memory (``param_bytes``), the CPU pays no
communication. Devices of one class (same kind, memory and speed) are
interchangeable, so the state counts devices used per class, and a device may
stay empty. Pieces whose compute alone exceeds an upper bound (the best
linear split's load) are pruned, which keeps the search small.

When the DAG has too many ideals (wide graphs), the zero-time units are fused
first (as the authors' solver does); if there are still too many, the DP
runs over a few topological orders (contiguous splits of one order, as
PipeDream does) instead. Finally `placer.placers.load_search` moves (and
swaps) units between devices while that lowers the max load, starting from
the DP's split and from balanced non-contiguous placements (the METIS
partition; LPT and round robin on graphs of at most 2000 units), then (on
those graphs too) kicks the best one and descends again (iterated local
search); it can leave the contiguous space and beat the DP.

Every bound is on work, never on the clock, so the answer depends on the
inputs only (not on the machine's load, nor on a first call's compilation):
the DP's pair budget and enumeration steps, at most ``search_moves`` moves
per descent and ``kicks`` kicks (defaults `load_search.SEARCH_MOVES`,
`load_search.KICKS`). ``time_limit`` (`placer.placers.time_cap`, counted from
the placer's start) is only a safety cap for huge graphs: past it the search
stops with its best placement so far and ``meta`` says ``time_capped: true``.

On a topology the pieces then swap alike devices by
`placer.placers.routes.route_mapping` when that lowers the max load: the
DP and the search count device loads, and a piece's transfers also load the
link directions of its routes (a switch uplink, DGX-1's PCIe paths between
GPUs without NVLink), which the objective counts and the swap shortens.
"""

from __future__ import annotations

import time
from typing import Annotated

import numba
import numpy as np

from placer.cluster import Cluster
from placer.graph import OpGraph
from placer.objectives import ThroughputModel
from placer.placement import Placement
from placer.placers.common import Problem, colocation_units
from placer.placers.load_search import KICKS, SEARCH_MOVES, balanced_starts, improve, iterate
from placer.placers.options import Option
from placer.placers.pipeline_units import (
    Ideals, TooManyIdeals, UnitDag, build_units, chain_ideals, enumerate_ideals, is_backward, merge_trivial,
)
from placer.placers.registry import register
from placer.placers.routes import route_mapping
from placer.placers.time_cap import TIME_LIMIT_SECONDS, Deadline, capped_meta

DEFAULT_MAX_IDEALS = 40_000
DEFAULT_PAIR_BUDGET = 30_000_000
_ENUMERATION_STEPS = 5_000_000
_MANY_UNITS = 2000  # past this: no ideal enumeration, one linear order cut into _BLOCKS blocks
_BLOCKS = 1000


class _Compiled:
    """A graph, cluster and unit DAG compiled to the arrays the DP kernel reads."""

    def __init__(self, model: ThroughputModel, dag: UnitDag, respect_memory: bool = True):
        graph, cluster = model.graph, model.cluster
        self.model, self.dag = model, dag
        m = dag.num_units
        unit = dag.unit
        # device classes: interchangeable devices
        keys: dict[tuple, int] = {}
        self.device_class = np.array([
            keys.setdefault((d.kind, d.memory_bytes, d.peak_flops, d.memory_bandwidth, d.op_overhead,
                             bool(model.pays[i])), len(keys))
            for i, d in enumerate(cluster.devices)], dtype=np.int64)
        C = len(keys)
        rep = np.array([int(np.flatnonzero(self.device_class == c)[0]) for c in range(C)])
        self.count = np.bincount(self.device_class, minlength=C).astype(np.int64)
        self.radix = np.ones(C, dtype=np.int64)
        for c in range(1, C):
            self.radix[c] = self.radix[c - 1] * (self.count[c - 1] + 1)
        self.num_states = int(self.radix[-1] * (self.count[-1] + 1))
        self.cap = model.memory_bytes[rep].copy() if respect_memory else np.full(C, np.inf)
        self.pays = model.pays[rep].astype(np.bool_)
        self.unit_time = np.zeros((m, C))
        np.add.at(self.unit_time, unit, model.times[:, rep])
        self.unit_mem = np.bincount(unit, weights=model.params, minlength=m).astype(np.float64)
        # ops that can pay communication: those with a consumer in another unit
        s_off, s_idx = graph.successors
        xfer = _uniform_transfer_time(model)
        cop_unit, cop_cost, cop_nsu, succ_units = [], [], [], []
        for u in range(len(graph)):
            su = sorted({int(unit[v]) for v in s_idx[s_off[u]:s_off[u + 1]]} - {int(unit[u])})
            if su:
                cop_unit.append(int(unit[u]))
                cop_cost.append(xfer[u])
                cop_nsu.append(len(su))
                succ_units.append(su)
        self.cop_unit = np.array(cop_unit, dtype=np.int64)
        self.cop_cost = np.array(cop_cost, dtype=np.float64)
        self.cop_nsu = np.array(cop_nsu, dtype=np.int64)
        self.uo_off, self.uo_idx = _csr(m, [(int(x), k) for k, x in enumerate(cop_unit)])
        self.us_off, self.us_idx = _csr(m, [(x, k) for k, su in enumerate(succ_units) for x in su])

    def run(self, ideals: Ideals, ub: float, pair_budget: int):
        """Solve the DP over `ideals`; None when the pair budget runs out."""
        N = len(ideals)
        dp = np.full((self.num_states, N), np.inf)
        choice_c = np.full((self.num_states, N), -1, dtype=np.int64)
        choice_j = np.full((self.num_states, N), -1, dtype=np.int64)
        pairs = _dp_over_ideals(
            ideals.sub_off, ideals.sub_ideal, ideals.sub_unit, self.unit_time, self.unit_mem, self.cap,
            self.pays, self.cop_cost, self.cop_unit, self.cop_nsu, self.uo_off, self.uo_idx, self.us_off,
            self.us_idx, self.count, self.radix, ub * (1 + 1e-9), pair_budget, dp, choice_c, choice_j,
        )
        if pairs < 0:
            return None
        return dp, choice_c, choice_j, pairs

    def backtrack(self, ideals: Ideals, choice_c: np.ndarray, choice_j: np.ndarray) -> np.ndarray | None:
        """Device per op of the optimal split (None when no split fits)."""
        s, i = self.num_states - 1, len(ideals) - 1
        unit_device = np.full(self.dag.num_units, -1, dtype=np.int64)
        free = {c: list(np.flatnonzero(self.device_class == c)) for c in range(len(self.count))}
        while i != 0:
            c, j = int(choice_c[s, i]), int(choice_j[s, i])
            if c < 0:
                return None
            if j != i:
                device = free[c].pop(0)
                piece = ideals.masks[i] & ~ideals.masks[j]
                for x in _bits(piece):
                    unit_device[x] = device
            else:
                free[c].pop()  # an empty device of class c
            s -= int(self.radix[c])
            i = j
        return unit_device[self.dag.unit]


def _metis_start(graph: OpGraph, cluster: Cluster) -> dict[str, np.ndarray]:
    """METIS's balanced min-cut partition (the ``metis`` placer) as one more local-search start."""
    from placer.placers.metis import place_metis

    try:
        p = place_metis(graph, cluster)
    except Exception:  # a start is optional; the DP split and the others remain
        return {}
    return {"metis": p.assignment(graph, cluster)}


def _greedy_split(dag: UnitDag, order: np.ndarray, times: np.ndarray, model: ThroughputModel) -> np.ndarray:
    """Cut `order` into equal-compute pieces over the non-CPU devices: an upper bound for the DP."""
    devices = [i for i, d in enumerate(model.cluster.devices) if d.kind != "cpu"] or list(range(model.num_devices))
    target = times.sum() / len(devices)
    unit_device = np.empty(dag.num_units, dtype=np.int64)
    k, acc = 0, 0.0
    for u in order.tolist():
        if acc > 0 and acc + times[u] / 2 > target * (k + 1) and k < len(devices) - 1:
            k += 1
        acc += times[u]
        unit_device[u] = devices[k]
    return unit_device[dag.unit]


def _uniform_transfer_time(model: ThroughputModel) -> np.ndarray:
    """Each op's transfer time, independent of the link: its own, else its slowest link."""
    D = model.num_devices
    if D < 2:
        return np.where(model.xfer_time >= 0, model.xfer_time, 0.0)
    off = ~np.eye(D, dtype=bool)
    slowest = (model.latency[off][None, :] + model.out_bytes[:, None] / model.bandwidth[off][None, :]).max(axis=1)
    return np.where(model.xfer_time >= 0, model.xfer_time, slowest)


def _csr(rows: int, pairs: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    off = np.zeros(rows + 1, dtype=np.int64)
    pairs = sorted(pairs)
    for r, _ in pairs:
        off[r + 1] += 1
    np.cumsum(off, out=off)
    return off, np.array([v for _, v in pairs], dtype=np.int64)


def _bits(mask: int):
    k = 0
    while mask:
        if mask & 1:
            yield k
        mask >>= 1
        k += 1


@numba.njit(cache=True)
def _contrib(k, in_s, kcnt, cop_unit, cop_nsu, cop_cost):
    """Communication op `k` charges the piece: as a sender inside it, or a source feeding it."""
    if in_s[cop_unit[k]]:
        return cop_cost[k] if kcnt[k] < cop_nsu[k] else 0.0
    return cop_cost[k] if kcnt[k] > 0 else 0.0


@numba.njit(cache=True)
def _toggle(x, delta, in_s, kcnt, comm, cop_unit, cop_nsu, cop_cost, uo_off, uo_idx, us_off, us_idx):
    """Add (delta=1) or remove (delta=-1) unit `x` from the piece; returns the new communication."""
    for t in range(uo_off[x], uo_off[x + 1]):
        k = uo_idx[t]
        comm -= _contrib(k, in_s, kcnt, cop_unit, cop_nsu, cop_cost)
    for t in range(us_off[x], us_off[x + 1]):
        k = us_idx[t]
        comm -= _contrib(k, in_s, kcnt, cop_unit, cop_nsu, cop_cost)
    in_s[x] = delta > 0
    for t in range(us_off[x], us_off[x + 1]):
        kcnt[us_idx[t]] += delta
    for t in range(uo_off[x], uo_off[x + 1]):
        k = uo_idx[t]
        comm += _contrib(k, in_s, kcnt, cop_unit, cop_nsu, cop_cost)
    for t in range(us_off[x], us_off[x + 1]):
        k = us_idx[t]
        comm += _contrib(k, in_s, kcnt, cop_unit, cop_nsu, cop_cost)
    return comm


@numba.njit(cache=True)
def _dp_over_ideals(sub_off, sub_ideal, sub_unit, unit_time, unit_mem, cap, pays, cop_cost, cop_unit, cop_nsu,
                    uo_off, uo_idx, us_off, us_idx, count, radix, ub, pair_budget, dp, choice_c, choice_j):
    """Fill `dp` (see the module docstring); returns the pairs visited, or -1 past the budget.

    For each ideal I (smallest first) a depth-first walk removes maximal
    units one at a time, so the piece I \\ J grows by one unit per step and
    its compute, memory and communication are updated incrementally.
    """
    N = sub_off.shape[0] - 1
    m, C = unit_time.shape
    S = dp.shape[0]
    has = np.zeros((S, C), dtype=np.bool_)
    for s in range(S):
        for c in range(C):
            has[s, c] = (s // radix[c]) % (count[c] + 1) > 0
    for s in range(S):
        dp[s, 0] = 0.0
    stamp = np.full(N, -1, dtype=np.int64)
    in_s = np.zeros(m, dtype=np.bool_)
    kcnt = np.zeros(cop_cost.shape[0], dtype=np.int64)
    st_j = np.empty(m + 2, dtype=np.int64)
    st_k = np.empty(m + 2, dtype=np.int64)
    st_x = np.empty(m + 2, dtype=np.int64)
    s_time = np.zeros(C)
    cost = np.empty(C)
    pairs = 0
    for i in range(1, N):
        stamp[i] = i
        top = 0
        st_j[0], st_k[0], st_x[0] = i, sub_off[i], -1
        comm = 0.0
        s_mem = 0.0
        s_time[:] = 0.0
        while top >= 0:
            j = st_j[top]
            k = st_k[top]
            if k < sub_off[j + 1]:
                st_k[top] = k + 1
                j2 = sub_ideal[k]
                if stamp[j2] == i:
                    continue
                stamp[j2] = i
                x = sub_unit[k]
                comm = _toggle(x, 1, in_s, kcnt, comm, cop_unit, cop_nsu, cop_cost, uo_off, uo_idx, us_off, us_idx)
                s_mem += unit_mem[x]
                alive = False
                for c in range(C):
                    s_time[c] += unit_time[x, c]
                    if s_time[c] <= ub and s_mem <= cap[c]:
                        alive = True
                pairs += 1
                if pairs > pair_budget:
                    return -1
                if not alive:  # compute and memory only grow deeper down: prune
                    comm = _toggle(x, -1, in_s, kcnt, comm, cop_unit, cop_nsu, cop_cost,
                                   uo_off, uo_idx, us_off, us_idx)
                    s_mem -= unit_mem[x]
                    for c in range(C):
                        s_time[c] -= unit_time[x, c]
                    continue
                for c in range(C):
                    cost[c] = s_time[c] + (comm if pays[c] else 0.0)
                    if s_mem > cap[c] or cost[c] > ub:
                        cost[c] = np.inf
                for s in range(S):
                    best = dp[s, i]
                    for c in range(C):
                        if has[s, c] and cost[c] < best:
                            cand = max(dp[s - radix[c], j2], cost[c])
                            if cand < best:
                                best = cand
                                choice_c[s, i] = c
                                choice_j[s, i] = j2
                    dp[s, i] = best
                top += 1
                st_j[top], st_k[top], st_x[top] = j2, sub_off[j2], x
            else:
                x = st_x[top]
                if x >= 0:
                    comm = _toggle(x, -1, in_s, kcnt, comm, cop_unit, cop_nsu, cop_cost,
                                   uo_off, uo_idx, us_off, us_idx)
                    s_mem -= unit_mem[x]
                    for c in range(C):
                        s_time[c] -= unit_time[x, c]
                top -= 1
        for s in range(S):  # leave a device of class c empty
            for c in range(C):
                if has[s, c] and dp[s - radix[c], i] < dp[s, i]:
                    dp[s, i] = dp[s - radix[c], i]
                    choice_c[s, i] = c
                    choice_j[s, i] = i
    return pairs


def best_split(graph: OpGraph, cluster: Cluster, *, max_ideals: int = DEFAULT_MAX_IDEALS,
               pair_budget: int = DEFAULT_PAIR_BUDGET, model: ThroughputModel | None = None,
               respect_memory: bool = True):
    """The DP's best contiguous split: ``(assignment, max_load, info)``.

    `info` says which search ran (``ideals`` over the unit DAG, with or
    without trivial merges, or ``orders`` of linear splits), its size and the
    pairs visited. The assignment is None when no split fits in memory
    (with ``respect_memory=False`` memory is ignored).
    """
    model = model or ThroughputModel(graph, cluster)
    backward = is_backward(graph)
    dag = build_units(graph, backward)
    info: dict = {"units": dag.num_units}

    def solve(d: UnitDag, ideals: Ideals, ub: float):
        comp = _Compiled(model, d, respect_memory)
        out = comp.run(ideals, ub, pair_budget)
        if out is None:
            return None
        dp, cc, cj, pairs = out
        assignment = comp.backtrack(ideals, cc, cj)
        return assignment, float(dp[-1, -1]), pairs

    # linear splits first: cheap, and their best load bounds the full search
    best_a, best_v, pairs_total = None, np.inf, 0
    times = np.zeros(dag.num_units)
    np.add.at(times, dag.unit, model.times.min(axis=1))
    chain_dag, orders = dag, dag.topological_orders(times)
    if dag.num_units > _MANY_UNITS:  # each order costs ~units^2 / devices pairs: cut one into blocks
        chain_dag = _blocks(dag, orders[0], _BLOCKS)
        times = np.bincount(chain_dag.unit, weights=model.times.min(axis=1), minlength=chain_dag.num_units)
        orders = [np.arange(chain_dag.num_units)]
        info["blocks"] = chain_dag.num_units
    for order in orders:
        ub = min(best_v, model.max_load(_greedy_split(chain_dag, order, times, model)))
        res = solve(chain_dag, chain_ideals(order), ub)
        if res is not None and res[0] is None and np.isfinite(ub):  # the greedy split broke memory
            res = solve(chain_dag, chain_ideals(order), np.inf)
        if res is None or res[0] is None:
            continue
        v = model.max_load(res[0])
        pairs_total += res[2]
        if v < best_v:
            best_a, best_v = res[0], v
    info.update(search="orders", pairs=pairs_total)
    for d in (dag, None):
        if dag.num_units > _MANY_UNITS:
            break
        if d is None:
            d = merge_trivial(graph, dag, model.times, backward)
            if not d.merged_trivial:
                break
        try:  # enumerating costs ideals x units steps in Python: keep it to seconds
            ideals = enumerate_ideals(d, min(max_ideals, max(1, _ENUMERATION_STEPS // d.num_units)))
        except TooManyIdeals:
            info.setdefault("too_many_ideals", []).append(d.num_units)
            continue
        res = solve(d, ideals, best_v if np.isfinite(best_v) else np.inf)
        if res is None:
            info["pair_budget_exceeded"] = True
            break
        a, _, pairs = res
        info.update(search="ideals", ideals=len(ideals), merged_trivial=d.merged_trivial,
                    units=d.num_units, pairs=pairs_total + pairs)
        if a is not None:
            v = model.max_load(a)
            if v <= best_v:
                best_a, best_v = a, v
        break
    return best_a, best_v, info


def _route_swap(graph: OpGraph, cluster: Cluster, model: ThroughputModel, assignment: np.ndarray,
                info: dict) -> np.ndarray:
    """`assignment` with alike devices swapped by `route_mapping` if that lowers the max load (a topology)."""
    if cluster.topology is None:
        return assignment
    problem = Problem.build(graph, cluster)
    unit_device = np.array([assignment[ops[0]] for ops in problem.unit_ops], dtype=np.int64)
    swapped = route_mapping(problem, unit_device, np.arange(len(cluster)))[assignment]
    before, after = model.max_load(assignment), model.max_load(swapped)
    if after < before:
        info["route_swap"] = {"max_load_before": before, "max_load_after": after}
        return swapped
    return assignment


def _blocks(dag: UnitDag, order: np.ndarray, count: int) -> UnitDag:
    """`dag` with the units of `order` grouped into `count` consecutive blocks (a coarser chain)."""
    block_of = np.empty(dag.num_units, dtype=np.int64)
    block_of[order] = np.arange(dag.num_units) * count // dag.num_units
    e = block_of[dag.edges] if len(dag.edges) else dag.edges
    e = np.unique(e[e[:, 0] != e[:, 1]], axis=0) if len(e) else e
    return UnitDag(block_of[dag.unit], count, e.reshape(-1, 2))


@register("pipeline_dp", objectives=("throughput",),
          description="throughput-optimal pipeline split (max device load): DP over contiguous unit sets, "
                      "then local search")
def place_pipeline_dp(
    graph: OpGraph, cluster: Cluster, *,
    max_ideals: Annotated[int, Option("most unit sets (ideals) the DP may enumerate", gt=0)] = DEFAULT_MAX_IDEALS,
    pair_budget: Annotated[int, Option("most ideal pairs the DP may examine", gt=0)] = DEFAULT_PAIR_BUDGET,
    local_search: Annotated[bool, Option("improve the DP's split by local search")] = True,
    search_moves: Annotated[int, Option("most moves of each local-search descent", gt=0)] = SEARCH_MOVES,
    kicks: Annotated[int, Option("kicks of the iterated local search (graphs of at most 2000 units)",
                                 ge=0)] = KICKS,
    seed: Annotated[int, Option("seed of the local search", ge=0)] = 0,
    time_limit: Annotated[float, Option("seconds the placer may take; past it the local search stops with its "
                                        "best so far and meta time_capped says so", ge=0)] = TIME_LIMIT_SECONDS,
) -> Placement:
    """Best contiguous split by the DP, improved by local search (see the module docstring).

    It optimises the throughput objective whatever `registry.place` is asked
    (and says so for the others).
    """
    deadline = Deadline(time_limit)
    limits = {"max_ideals": max_ideals, "pair_budget": pair_budget}
    model = ThroughputModel(graph, cluster)
    t0 = time.perf_counter()
    assignment, dp_load, info = best_split(graph, cluster, model=model, **limits)
    info["dp_seconds"] = time.perf_counter() - t0
    exceeded = assignment is None
    if exceeded:  # as the other placers do: place anyway, say so, let the simulator judge
        assignment, dp_load, info = best_split(graph, cluster, model=model, respect_memory=False, **limits)
    info["dp_max_load"] = dp_load
    if local_search:
        t1 = time.perf_counter()
        unit = colocation_units(graph)
        starts = {"dp": assignment, **_metis_start(graph, cluster)}
        small = int(unit.max()) + 1 <= _MANY_UNITS
        if small:  # on op-level graphs the balanced starts are far off and every descent is costly
            starts.update(balanced_starts(model, unit))
        results = {}
        for name, start in starts.items():
            if name != "dp" and not exceeded and not model.loads(start).memory_ok:
                continue
            a, value = improve(model, start, unit, seed=seed, max_moves=search_moves, deadline=deadline)
            results[name] = (value, a)
        best = min(results, key=lambda k: (results[k][0], k != "dp"))
        assignment = results[best][1]
        info["local_search"] = {name: value for name, (value, _) in results.items()}
        info["local_search_best_start"] = best
        if small:  # likewise the kicks
            assignment, kicked = iterate(model, assignment, unit, seed=seed, kicks=kicks, max_moves=search_moves,
                                         deadline=deadline)
            info["iterated_local_search"] = kicked
        info["local_search_seconds"] = time.perf_counter() - t1
    assignment = _route_swap(graph, cluster, model, assignment, info)
    return Placement.from_assignment(graph, cluster, assignment, "pipeline_dp",
                                     meta={"pipeline_dp": info, "memory_estimate_exceeded": exceeded,
                                           **capped_meta(deadline)})
