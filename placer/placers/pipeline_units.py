"""The units a pipeline split moves, their order, and the ideals of that order.

A pipeline split gives each device a *contiguous* set of the graph: the
difference of two ideals (downward-closed sets) of a DAG over units. This
module builds that DAG the way Tarnawski et al. (NeurIPS 2020) do, so that a
dynamic program over its ideals searches at least the splits theirs does:

1. Ops sharing a colocation key form a class. In a training graph an op is
   forward or backward (`is_backward`); a class's forward ops form one unit
   and its backward ops ride along with them (a layer's backward pass stays
   with its forward pass). A class with only backward ops is a unit of its own.
2. The order is given by forward edges between units; for units made only of
   backward ops, a backward edge ``u -> v`` orders ``unit(v)`` before
   ``unit(u)`` (the backward pass runs the forward order in reverse).
3. Units on a cycle of that order (colocation can close one) are fused.
4. `merge_trivial` optionally fuses units that take no time and touch exactly
   one other unit through forward edges (constants, reshapes): the authors'
   solver does this too; it shrinks the number of ideals a lot.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from placer.graph import OpGraph


def is_backward(graph: OpGraph) -> np.ndarray:
    """Per op: is it part of the backward pass?

    Imported profiles say so in the op type (``"Backward"``, the MSR
    importer's marking); TensorFlow names gradient ops ``gradients/...`` (TF1)
    or ``gradient_tape/...`` (TF2).
    """
    return np.array([op.op == "Backward" or op.name.startswith(("gradients/", "gradient_tape/"))
                     for op in graph.ops], dtype=bool)


@dataclass
class UnitDag:
    """Units of a graph and the DAG that orders them.

    Attributes
    ----------
    unit : unit id of each op.
    num_units : number of units.
    edges : ``[E, 2]`` distinct ordering edges between units (a DAG).
    merged_trivial : whether `merge_trivial` fused units.
    """

    unit: np.ndarray
    num_units: int
    edges: np.ndarray
    merged_trivial: bool = False

    def predecessor_masks(self) -> list[int]:
        """Per unit, a bit mask of the units that must come before it."""
        preds = [0] * self.num_units
        for a, b in self.edges.tolist():
            preds[b] |= 1 << a
        return preds

    def topological_orders(self, times: np.ndarray) -> list[np.ndarray]:
        """A few topological orders of the units (for linear splits).

        One takes ready units by smallest id, one depth-first (the authors'
        ``linearize``), one by longest remaining path (critical units first).
        """
        m = self.num_units
        succ: list[list[int]] = [[] for _ in range(m)]
        indeg = np.zeros(m, dtype=np.int64)
        for a, b in self.edges.tolist():
            succ[a].append(b)
            indeg[b] += 1
        by_id = _kahn(m, succ, indeg.copy(), key=lambda u: u)
        # longest path to a sink, counting the units' time
        tail = times.astype(np.float64).copy()
        for u in reversed(by_id):
            for v in succ[u]:
                tail[u] = max(tail[u], times[u] + tail[v])
        orders = [by_id, _kahn(m, succ, indeg.copy(), key=None),
                  _kahn(m, succ, indeg.copy(), key=lambda u: (-tail[u], u))]
        unique: list[np.ndarray] = []
        for o in orders:
            arr = np.asarray(o, dtype=np.int64)
            if not any(np.array_equal(arr, u) for u in unique):
                unique.append(arr)
        return unique


def _kahn(m: int, succ: list[list[int]], indeg: np.ndarray, key) -> list[int]:
    """Kahn's algorithm taking the ready unit with the smallest `key`, or depth first when `key` is None."""
    ready = [u for u in range(m) if indeg[u] == 0]
    if key is not None:
        ready = [(key(u), u) for u in ready]
        heapq.heapify(ready)
    order: list[int] = []
    while ready:
        u = ready.pop() if key is None else heapq.heappop(ready)[1]
        order.append(u)
        for v in succ[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                if key is None:
                    ready.append(v)
                else:
                    heapq.heappush(ready, (key(v), v))
    return order


def build_units(graph: OpGraph, backward: np.ndarray | None = None) -> UnitDag:
    """The unit DAG of `graph` (steps 1-3 of the module docstring)."""
    n = len(graph)
    bwd = is_backward(graph) if backward is None else backward
    keys: dict[object, int] = {}
    cls = np.empty(n, dtype=np.int64)
    for i, op in enumerate(graph.ops):
        key = op.colocation if op.colocation is not None else (None, i)
        cls[i] = keys.setdefault(key, len(keys))
    has_forward = np.zeros(len(keys), dtype=bool)
    has_forward[cls[~bwd]] = True
    p_off, p_idx = graph.predecessors
    dst = np.repeat(np.arange(n), np.diff(p_off))
    src = p_idx
    cu, cv = cls[src], cls[dst]
    fwd_edge = ~bwd[src] & ~bwd[dst] & (cu != cv)
    orphan_edge = bwd[src] & bwd[dst] & (cu != cv) & (~has_forward[cu] | ~has_forward[cv])
    a = np.concatenate([cu[fwd_edge], cv[orphan_edge]])
    b = np.concatenate([cv[fwd_edge], cu[orphan_edge]])
    k = len(keys)
    adj = csr_matrix((np.ones(len(a)), (a, b)), shape=(k, k))
    _, label = connected_components(adj, directed=True, connection="strong")
    return _relabel(label[cls], label[a], label[b])


def _relabel(unit: np.ndarray, a: np.ndarray, b: np.ndarray, merged: bool = False) -> UnitDag:
    """Number units 0..m-1 in order of first appearance and dedupe the edges."""
    _, first, inverse = np.unique(unit, return_index=True, return_inverse=True)
    rank = np.argsort(np.argsort(first))  # ids by first op in graph order
    new_unit = rank[inverse]
    lookup = dict(zip(np.unique(unit).tolist(), rank.tolist()))
    pairs = {(lookup[x], lookup[y]) for x, y in zip(a.tolist(), b.tolist()) if lookup[x] != lookup[y]}
    edges = np.array(sorted(pairs), dtype=np.int64).reshape(-1, 2)
    return UnitDag(new_unit.astype(np.int64), len(first), edges, merged)


def merge_trivial(graph: OpGraph, dag: UnitDag, times: np.ndarray, backward: np.ndarray | None = None) -> UnitDag:
    """Fuse units that take no time and have exactly one forward neighbour.

    A unit qualifies when its ops take zero time on every device (`times`,
    ``[num_ops, num_devices]``), none of its forward ops has an edge to or
    from a backward op, and its forward ops' edges to other units go to one
    unit, in one direction. Repeats until nothing changes.
    """
    n = len(graph)
    bwd = is_backward(graph) if backward is None else backward
    m = dag.num_units
    unit = dag.unit
    busy = np.zeros(m)
    np.add.at(busy, unit, times.max(axis=1))
    p_off, p_idx = graph.predecessors
    dst = np.repeat(np.arange(n), np.diff(p_off))
    src = p_idx
    blocked = np.zeros(m, dtype=bool)
    mixed = bwd[src] != bwd[dst]
    blocked[unit[np.where(bwd[src], dst, src)[mixed]]] = True
    neighbours: list[set[tuple[int, int]]] = [set() for _ in range(m)]
    ff = ~bwd[src] & ~bwd[dst] & (unit[src] != unit[dst])
    for u, v in zip(unit[src[ff]].tolist(), unit[dst[ff]].tolist()):
        neighbours[u].add((1, v))
        neighbours[v].add((0, u))
    parent = list(range(m))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    changed = True
    while changed:
        changed = False
        for x in range(m):
            if find(x) != x or busy[x] > 0 or blocked[x]:
                continue
            near = {(d, find(y)) for d, y in neighbours[x]}
            near = {(d, y) for d, y in near if y != x}
            if len(near) == 1:
                y = next(iter(near))[1]
                parent[x] = y
                busy[y] += busy[x]
                blocked[y] |= blocked[x]
                neighbours[y] |= neighbours[x]
                changed = True
    roots = np.array([find(x) for x in range(m)], dtype=np.int64)
    if (roots == np.arange(m)).all():
        return dag
    e = dag.edges
    return _relabel(roots[unit], roots[e[:, 0]], roots[e[:, 1]], merged=True)


@dataclass
class Ideals:
    """The ideals (downward-closed unit sets) of a unit DAG, smallest first.

    Attributes
    ----------
    masks : each ideal as a bit mask over units (Python ints).
    sub_off, sub_ideal, sub_unit : CSR of immediate sub-ideals: ideal ``i``
        minus its maximal unit ``sub_unit[k]`` is ideal ``sub_ideal[k]``.
    """

    masks: list[int]
    sub_off: np.ndarray
    sub_ideal: np.ndarray
    sub_unit: np.ndarray

    def __len__(self) -> int:
        return len(self.masks)


class TooManyIdeals(Exception):
    """The unit DAG has more ideals than the caller allows."""


def enumerate_ideals(dag: UnitDag, limit: int) -> Ideals:
    """All ideals of `dag`, breadth first (so by size).

    Raises
    ------
    TooManyIdeals
        When there are more than `limit` (their number can grow exponentially
        with the graph's width).
    """
    m = dag.num_units
    preds = dag.predecessor_masks()
    index = {0: 0}
    masks = [0]
    subs: list[list[tuple[int, int]]] = [[]]
    frontier = [0]
    while frontier:
        nxt: list[int] = []
        for i in frontier:
            ideal = masks[i]
            for v in range(m):
                bit = 1 << v
                if ideal & bit or preds[v] & ideal != preds[v]:
                    continue
                grown = ideal | bit
                j = index.get(grown)
                if j is None:
                    j = index[grown] = len(masks)
                    if j >= limit:
                        raise TooManyIdeals(f"more than {limit} ideals")
                    masks.append(grown)
                    subs.append([])
                    nxt.append(j)
                subs[j].append((i, v))
        frontier = nxt
    return _ideals_from_subs(masks, subs)


def chain_ideals(order: np.ndarray) -> Ideals:
    """The ideals of a total order of units: its prefixes (a linear split)."""
    masks = [0]
    subs: list[list[tuple[int, int]]] = [[]]
    for k, u in enumerate(order.tolist()):
        masks.append(masks[-1] | (1 << u))
        subs.append([(k, u)])
    return _ideals_from_subs(masks, subs)


def _ideals_from_subs(masks: list[int], subs: list[list[tuple[int, int]]]) -> Ideals:
    off = np.zeros(len(masks) + 1, dtype=np.int64)
    np.cumsum([len(s) for s in subs], out=off[1:])
    flat = [p for s in subs for p in s]
    sub_ideal = np.array([p[0] for p in flat], dtype=np.int64)
    sub_unit = np.array([p[1] for p in flat], dtype=np.int64)
    return Ideals(masks, off, sub_ideal, sub_unit)
