"""Grouping: thousands of ops become at most G groups, and the policy places groups.

Two steps, in the order the paper's co-location heuristics take them:

1. ops sharing a colocation key are merged (a group never splits a
   colocation set, so every placement of groups honours TensorFlow's rule);
2. the graph of groups is coarsened by heavy-edge matching, as METIS does:
   each pass merges disjoint pairs of adjacent groups, the pairs exchanging
   the most bytes first, so that large tensors end up inside a group and never
   have to cross a link. A merge is refused when the pair would exceed a
   compute share (keeps groups balanced, relaxed when nothing else merges) or
   a memory cap (a fraction of the smallest device: a group must always fit).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from placer.cluster import Cluster
from placer.cost_model import op_time_matrix
from placer.dag import levels
from placer.errors import GroupingError, PlacerError
from placer.graph import OpGraph

DEFAULT_MAX_GROUPS = 256


@dataclass(frozen=True)
class Grouping:
    """Which group each op belongs to.

    Attributes
    ----------
    group_of_op : ``[num_ops]`` group index per op (graph order). Groups are
        numbered in topological order (by their earliest op), the order the
        policy reads them in.
    num_groups : G.
    """

    group_of_op: np.ndarray
    num_groups: int

    def expand(self, group_devices: np.ndarray) -> np.ndarray:
        """Device per op ``[..., num_ops]`` from device per group ``[..., G]``."""
        return np.asarray(group_devices)[..., self.group_of_op]

    def project(self, op_devices: np.ndarray, num_devices: int, weights: np.ndarray | None = None) -> np.ndarray:
        """Device per group from device per op: the device holding most of the group's weight.

        Used to turn a heuristic's op placement into a target the policy can imitate.
        """
        w = np.ones(len(self.group_of_op)) if weights is None else np.asarray(weights, dtype=np.float64)
        votes = np.zeros((self.num_groups, num_devices))
        np.add.at(votes, (self.group_of_op, np.asarray(op_devices)), w + 1e-12)
        return votes.argmax(axis=1).astype(np.int64)

    def sizes(self) -> np.ndarray:
        """Ops per group."""
        return np.bincount(self.group_of_op, minlength=self.num_groups)


def group_graph(graph: OpGraph, cluster: Cluster, max_groups: int = DEFAULT_MAX_GROUPS,
                times: np.ndarray | None = None, memory_fraction: float = 0.5,
                respect: np.ndarray | None = None, split_kinds: bool = False, balanced: bool = False,
                split_critical: bool = False) -> Grouping:
    """Group the ops of `graph` into at most `max_groups` groups for placement on `cluster`.

    Parameters
    ----------
    graph : the graph.
    cluster : where the groups will be placed (compute times and memory cap).
    max_groups : G, the most groups to return.
    times : ``[num_ops, num_devices]`` compute seconds; default the cost model's.
    memory_fraction : a group's weights plus outputs stay under this fraction
        of the smallest device's memory (colocation sets excepted: they are
        never split, whatever their size).
    respect : optional device per op of a reference placement (e.g. the best
        heuristic's): ops on different devices there are merged only when
        nothing else reaches `max_groups`, so the reference usually stays
        expressible as a placement of groups (what a warm start imitates).
    split_kinds : also keep apart, in the same way, ops that run fastest on
        different kinds of device (`fastest_kind`): the thousands of tiny ops
        a host CPU runs faster than a GPU (its per-op overhead is lower) then
        form groups of their own, which a policy can send to the CPU.
    balanced : when no two adjacent groups may merge within the compute
        share, merge groups that are neighbours in topological order (and
        within it) before raising the share. Without it, a graph whose small
        groups hang only off full ones ends with a few giant groups (densenet121:
        five hold 93% of the compute, so four GPUs cannot share it evenly);
        with it no group exceeds 2/G of the compute unless a colocation set does.
    split_critical : also keep apart, in the same way, the ops on a critical
        path (`critical_ops`) and the rest, so that a policy can keep the path
        on one device and spread the rest (what CPOP does per op, and what
        per-graph RL found on the Transformer: 630 of its 672 ms of critical
        ops on one GPU, against v5's 202-234 ms on each of three).

    Returns
    -------
    Grouping

    Raises
    ------
    PlacerError
        If `max_groups` is below 1; `GroupingError` if the memory cap
        forbids every merge that would reach it (`group_graph_fitting`
        asks for more groups instead).

    Examples
    --------
    >>> from placer import presets
    >>> from placer.synthetic import layered_graph
    >>> g = group_graph(layered_graph(500), presets.get("2gpu"), max_groups=40)
    >>> g.num_groups <= 40
    True
    """
    if not isinstance(max_groups, (int, np.integer)) or isinstance(max_groups, bool) or max_groups < 1:
        raise PlacerError(f"groups must be a positive integer, got {max_groups!r}")
    n = len(graph)
    if times is None:
        times = op_time_matrix(graph, cluster)
    op_time = times.min(axis=1)
    op_mem = graph.param_bytes + graph.output_bytes
    out_bytes = graph.output_bytes
    mem_cap = memory_fraction * min(d.memory_bytes for d in cluster.devices)

    gid = graph.colocation_ids
    num = int(gid.max()) + 1
    p_off, p_idx = graph.predecessors
    dst = np.repeat(np.arange(n), np.diff(p_off))
    # edges between groups, one per pair with their summed weight (the list shrinks as groups merge); +1: a
    # tensor of unknown size still ties its ops
    edge_a, edge_b, edge_w = _pair_edges(gid[p_idx], gid[dst], out_bytes[p_idx] + 1.0, num)

    time_cap = 2.0 * op_time.sum() / max_groups
    label = None
    if respect is not None or split_kinds or split_critical:
        kinds = fastest_kind(cluster, times) if split_kinds else np.zeros(n, dtype=np.int64)
        op_label = kinds if respect is None else np.asarray(respect, dtype=np.int64) * (int(kinds.max()) + 1) + kinds
        if split_critical:
            op_label = critical_ops(graph, op_time) * (int(op_label.max()) + 1) + op_label
        label = np.zeros(num, dtype=np.int64)
        label[gid] = op_label  # a colocation set shares one device anyway
    g_time = np.bincount(gid, weights=op_time, minlength=num)
    g_mem = np.bincount(gid, weights=op_mem, minlength=num)
    while num > max_groups:
        to, edge_a, edge_b, edge_w, g_time, g_mem, new_label = _heavy_edge_passes(
            edge_a, edge_b, edge_w, g_time, g_mem, time_cap, mem_cap, max_groups,
            np.zeros(0, dtype=np.int64) if label is None else label, label is not None)
        if len(g_time) < num:  # some passes merged
            gid = to[gid]
            num = len(g_time)
            label = None if label is None else new_label
            continue
        merged = None
        if balanced and np.isfinite(time_cap):
            merged = _merge_topological_neighbours(gid, graph.topo_rank, g_mem, mem_cap, num - max_groups, label,
                                                   g_time, time_cap)
        if merged is None and np.isfinite(time_cap):
            time_cap = time_cap * 2 if time_cap * 2 < g_time.sum() else np.inf
            continue
        if merged is None and label is not None:
            merged = _merge_topological_neighbours(gid, graph.topo_rank, g_mem, mem_cap, num - max_groups, label)
        if merged is None and label is not None:
            label = None  # the reference cannot be kept whole within max_groups
            time_cap = 2.0 * op_time.sum() / max_groups
            continue
        if label is not None:
            new_label = np.zeros(int(merged.max()) + 1, dtype=np.int64)
            new_label[merged] = label
            label = new_label
        if merged is None:
            merged = _merge_topological_neighbours(gid, graph.topo_rank, g_mem, mem_cap, num - max_groups)
        if merged is None:
            raise GroupingError(
                f"cannot group graph {graph.name!r} into {max_groups} groups: every further merge "
                f"would put a group over {memory_fraction:g} of the smallest device's memory; "
                "ask for more groups"
            )
        gid = merged[gid]
        num = int(gid.max()) + 1
        g_time = np.bincount(merged, weights=g_time, minlength=num)
        g_mem = np.bincount(merged, weights=g_mem, minlength=num)
        edge_a, edge_b, edge_w = _pair_edges(merged[edge_a], merged[edge_b], edge_w, num)
    return Grouping(_number_topologically(gid, graph.topo_rank), num)


def group_graph_fitting(graph: OpGraph, cluster: Cluster, max_groups: int = DEFAULT_MAX_GROUPS,
                        times: np.ndarray | None = None, **options) -> Grouping:
    """`group_graph` at `max_groups`, or at the fewest doublings of it that the memory cap allows.

    For callers whose G is a default rather than the user's word (a policy places a graph on the groups it
    was trained on): a graph whose tensors are too big for so few groups is then placed on more, not
    refused. The grouping's ``num_groups`` says how many it got.
    """
    asked = max_groups
    while True:
        try:
            return group_graph(graph, cluster, asked, times, **options)
        except GroupingError:
            if asked >= len(graph):
                raise
            asked = min(2 * asked, len(graph))


CRITICAL_SLACK = 0.01
"""An op is on a critical path when the longest path through it is within this share of the longest path."""


def critical_ops(graph: OpGraph, op_time: np.ndarray) -> np.ndarray:
    """``[num_ops]`` bool: the ops on a critical path (with `op_time` as costs, transfers free): those whose
    slack, the longest path over the longest path through them, is under `CRITICAL_SLACK` of it. Equal
    parallel branches (a Transformer's heads) are all critical."""
    top, bottom = levels(graph, op_time)
    length = float((top + bottom).max()) if len(graph) else 0.0
    return (length - (top + bottom)) <= CRITICAL_SLACK * length


def fastest_kind(cluster: Cluster, times: np.ndarray) -> np.ndarray:
    """``[num_ops]``: for each op, the index (in the order kinds first appear in `cluster`) of the device
    kind whose fastest device runs it fastest; all zeros on a cluster of one kind."""
    kinds = list(dict.fromkeys(d.kind for d in cluster.devices))
    of_device = np.array([kinds.index(d.kind) for d in cluster.devices])
    if len(kinds) == 1:
        return np.zeros(len(times), dtype=np.int64)
    best = np.stack([times[:, of_device == k].min(axis=1) for k in range(len(kinds))], axis=1)
    return best.argmin(axis=1).astype(np.int64)


def _pair_edges(a: np.ndarray, b: np.ndarray, w: np.ndarray, num: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Edges between `num` groups as ``(a, b, weight)`` with ``a < b``, one per pair, weights summed; edges
    within a group dropped."""
    keep = a != b
    a, b = np.minimum(a[keep], b[keep]), np.maximum(a[keep], b[keep])
    pair, inv = np.unique(a * num + b, return_inverse=True)
    return pair // num, pair % num, np.bincount(inv, weights=w[keep], minlength=len(pair))


@njit(cache=True)
def _match(xs, ys, num, max_merges):
    """Greedy matching of the pairs ``(xs[k], ys[k])`` in order: each group joins at most one pair, and at most
    `max_merges` pairs; ``(new id per group, merges)``, the second of a pair taking the first's id."""
    matched = np.zeros(num, dtype=np.bool_)
    new_id = np.arange(num)
    merges = 0
    for k in range(len(xs)):
        x, y = xs[k], ys[k]
        if matched[x] or matched[y]:
            continue
        matched[x] = True
        matched[y] = True
        new_id[y] = x
        merges += 1
        if merges >= max_merges:
            break
    return new_id, merges


@njit(cache=True)
def _heavy_edge_passes(pa, pb, weight, g_time, g_mem, time_cap, mem_cap, max_groups, label, has_label):
    """Coarsening passes until at most `max_groups` groups remain or a pass merges nothing; compiled, as a graph
    whose hubs merge one neighbour per pass takes hundreds of passes.

    A pass visits the pairs (`_pair_edges`) that may merge (within `time_cap` and `mem_cap`, and of one label
    with `has_label`) heaviest first, ties by ids, so the result is deterministic; each group joins at most
    one pair per pass (`_match`), and at most as many pairs merge as leave `max_groups` groups.

    Returns ``(new id per group given, pa, pb, weight, g_time, g_mem, label)`` of the merged groups (the
    label empty without `has_label`). Sums are taken in the order `np.bincount` takes them, so the groups
    are those of the uncompiled passes to the last bit.
    """
    num = len(g_time)
    to = np.arange(num)
    while num > max_groups and len(pa) > 0:
        allowed = (g_time[pa] + g_time[pb] <= time_cap) & (g_mem[pa] + g_mem[pb] <= mem_cap)
        if has_label:
            allowed &= label[pa] == label[pb]
        order = np.flatnonzero(allowed)
        # pairs are sorted by (pa, pb), so a stable sort by weight, heaviest first, is lexsort's order
        order = order[np.argsort(-weight[order], kind="mergesort")]
        new_id, merges = _match(pa[order], pb[order], num, num - max_groups)
        if merges == 0:
            break
        kept = np.cumsum(new_id == np.arange(num)) - 1  # the second of a pair takes the first's (lower) id
        merged = kept[new_id]
        new_num = num - merges
        new_time = np.zeros(new_num)
        new_mem = np.zeros(new_num)
        new_label = np.zeros(new_num if has_label else 0, dtype=np.int64)
        for i in range(num):
            new_time[merged[i]] += g_time[i]
            new_mem[merged[i]] += g_mem[i]
            if has_label:
                new_label[merged[i]] = label[i]
        g_time, g_mem, label = new_time, new_mem, new_label
        pa, pb, weight = _merge_edges(pa, pb, weight, merged, new_id != np.arange(num), new_num)
        to = merged[to]
        num = new_num
    return to, pa, pb, weight, g_time, g_mem, label


@njit(cache=True)
def _merge_edges(pa, pb, weight, merged, absorbed, num):
    """The pairs `pa`, `pb` (sorted by ``(pa, pb)``, one per pair, as `_pair_edges` leaves them) after their
    groups merge (new id per group: `merged`; `absorbed`: the groups merged into a lower one), with
    `_pair_edges`'s result to the last bit: each new pair's weights summed in the order of the old pairs.

    A pass merges a few groups, so only the pairs touching an absorbed group are sorted; the rest keep
    their order (surviving groups keep theirs) and are merged with them in one sweep.
    """
    touched = absorbed[pa] | absorbed[pb]
    untouched = np.flatnonzero(~touched)
    u_key = merged[pa[untouched]] * num + merged[pb[untouched]]
    t_pos = np.flatnonzero(touched)
    ta, tb = merged[pa[t_pos]], merged[pb[t_pos]]
    t_pos = t_pos[ta != tb]  # a pair inside one group drops out
    lo, hi = np.minimum(merged[pa[t_pos]], merged[pb[t_pos]]), np.maximum(merged[pa[t_pos]], merged[pb[t_pos]])
    order = np.argsort(lo * num + hi, kind="mergesort")  # stable: a key's pairs stay in their old order
    t_pos, t_key = t_pos[order], (lo * num + hi)[order]
    nu, nt = len(untouched), len(t_pos)
    out_a = np.empty(nu + nt, dtype=np.int64)
    out_b = np.empty(nu + nt, dtype=np.int64)
    out_w = np.zeros(nu + nt)
    m, i, j = 0, 0, 0
    while i < nu or j < nt:
        if j >= nt or (i < nu and u_key[i] < t_key[j]):
            key = u_key[i]
            out_w[m] += weight[untouched[i]]
            i += 1
        else:
            key = t_key[j]
            own = i < nu and u_key[i] == key  # an untouched pair with the same key: summed in old order
            for r in range(j, nt):
                if t_key[r] != key:
                    break
                if own and untouched[i] < t_pos[r]:
                    out_w[m] += weight[untouched[i]]
                    own = False
                    i += 1
                out_w[m] += weight[t_pos[r]]
                j += 1
            if own:
                out_w[m] += weight[untouched[i]]
                i += 1
        out_a[m], out_b[m] = key // num, key % num
        m += 1
    return out_a[:m], out_b[:m], out_w[:m]


def _merge_topological_neighbours(gid: np.ndarray, rank: np.ndarray, g_mem: np.ndarray, mem_cap: float,
                                  max_merges: int, label: np.ndarray | None = None,
                                  g_time: np.ndarray | None = None, time_cap: float = np.inf) -> np.ndarray | None:
    """Last resort when no edge may merge: join groups adjacent in topological order.

    With `label`, only groups of the same label, adjacent among that label's groups.
    """
    num = len(g_mem)
    first = np.full(num, len(gid), dtype=np.int64)
    np.minimum.at(first, gid, rank)
    order = np.argsort(first, kind="stable")
    if label is not None:
        order = order[np.argsort(label[order], kind="stable")]
    new_id = np.arange(num)
    merges = 0
    k = 0
    while k + 1 < num and merges < max_merges:
        x, y = order[k], order[k + 1]
        if ((label is None or label[x] == label[y]) and g_mem[x] + g_mem[y] <= mem_cap
                and (g_time is None or g_time[x] + g_time[y] <= time_cap)):
            new_id[y] = x
            merges += 1
            k += 2
        else:
            k += 1
    if merges == 0:
        return None
    _, dense = np.unique(new_id, return_inverse=True)
    return dense.astype(np.int64)


def _number_topologically(gid: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """Renumber groups by their earliest op in topological order."""
    num = int(gid.max()) + 1
    first = np.full(num, len(gid), dtype=np.int64)
    np.minimum.at(first, gid, rank)
    new = np.empty(num, dtype=np.int64)
    new[np.argsort(first, kind="stable")] = np.arange(num)
    return new[gid]
