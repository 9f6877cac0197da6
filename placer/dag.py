"""Longest paths through a DAG: levels, ranks and the critical path, one implementation each.

The graph is anything with an `OpGraph`'s structure arrays: ``topo_order``
(node indices in a topological order) and ``predecessors``/``successors``
as compressed rows ``(offsets, indices)``. Node i weighs ``weight[i]`` (an
op's time); where an edge has a cost, it is ``comm[i]``, the same for every
edge out of node i (sending i's output, as HEFT's mean costs are).

- ``downward_ranks``: ``rank_d(i) = max over predecessors j of rank_d(j) + weight[j] + comm[j]``,
  0 at an entry: the longest path from an entry to i, i excluded (CPOP's
  downward rank; with no edge costs, the *top level*, i's earliest start).
- ``upward_ranks``: ``rank_u(i) = weight[i] + max over successors j of comm[i] + rank_u(j)``,
  ``weight[i]`` at an exit: the longest path from i to an exit, i included
  (HEFT's upward rank; with no edge costs, the *bottom level*).
- ``levels``: both, with no edge costs.
- ``critical_path_length``: the longest path, ``max over i of top_level(i) + weight[i]``.

Floating point: each rank is summed in the order its formula is written,
along the direction it is defined (downward ranks and the critical path
from the entries, upward ranks from the exits). The two directions can
differ in the last bit for the same path, so the critical path is always
the forward sum and never ``max(upward_ranks)``. Ties need no rule: only
maxima of values are taken, never arg-maxima.

The loops are compiled with numba (HEFT and CPOP rank every op of 10k-op
graphs, and grouping and the policy's features take levels on every graph).
"""

from __future__ import annotations

import numpy as np
from numba import njit


def downward_ranks(graph, weight: np.ndarray, comm: np.ndarray | None = None) -> np.ndarray:
    """Longest path from an entry to each node, the node itself excluded (graph order).

    Parameters
    ----------
    graph : an `OpGraph` (or anything with its ``topo_order`` and ``predecessors``).
    weight : ``[n]`` time of each node.
    comm : ``[n]`` cost of each edge out of node i; none by default.

    Returns
    -------
    ``[n]`` float64: ``rank_d`` (see the module docstring).

    Examples
    --------
    >>> from placer.graph import Op, OpGraph
    >>> g = OpGraph("g", [Op("a", "T"), Op("b", "T", ["a"]), Op("c", "T", ["a", "b"])])
    >>> downward_ranks(g, np.array([1.0, 2.0, 4.0])).tolist()
    [0.0, 1.0, 3.0]
    >>> downward_ranks(g, np.array([1.0, 2.0, 4.0]), comm=np.array([0.5, 0.5, 0.5])).tolist()
    [0.0, 1.5, 4.0]
    """
    order, (p_off, p_idx), w = _arrays(graph, weight, graph.predecessors)
    return _downward(order, p_off, p_idx, w, _comm(comm, len(w)))


def upward_ranks(graph, weight: np.ndarray, comm: np.ndarray | None = None) -> np.ndarray:
    """Longest path from each node to an exit, the node itself included (graph order).

    Parameters
    ----------
    graph : an `OpGraph` (or anything with its ``topo_order`` and ``successors``).
    weight : ``[n]`` time of each node.
    comm : ``[n]`` cost of each edge out of node i; none by default.

    Returns
    -------
    ``[n]`` float64: ``rank_u`` (see the module docstring).

    Examples
    --------
    >>> from placer.graph import Op, OpGraph
    >>> g = OpGraph("g", [Op("a", "T"), Op("b", "T", ["a"]), Op("c", "T", ["a", "b"])])
    >>> upward_ranks(g, np.array([1.0, 2.0, 4.0])).tolist()
    [7.0, 6.0, 4.0]
    >>> upward_ranks(g, np.array([1.0, 2.0, 4.0]), comm=np.array([0.5, 0.5, 0.5])).tolist()
    [8.0, 6.5, 4.0]
    """
    order, (s_off, s_idx), w = _arrays(graph, weight, graph.successors)
    return _upward(order, s_off, s_idx, w, _comm(comm, len(w)))


def levels(graph, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(top, bottom)``: each node's top level (earliest start: `downward_ranks` with no edge costs) and
    bottom level (longest path to an exit, its own time included: `upward_ranks` with no edge costs)."""
    return downward_ranks(graph, weight), upward_ranks(graph, weight)


def critical_path_length(graph, weight: np.ndarray) -> float:
    """The longest path through the DAG when node i takes ``weight[i]`` and edges cost nothing (0 for no nodes).

    Examples
    --------
    >>> from placer.graph import Op, OpGraph
    >>> g = OpGraph("g", [Op("a", "T"), Op("b", "T", ["a"]), Op("c", "T", ["a"])])
    >>> critical_path_length(g, np.array([1.0, 2.0, 4.0]))
    5.0
    """
    order, (p_off, p_idx), w = _arrays(graph, weight, graph.predecessors)
    return float(_critical_path(order, p_off, p_idx, w))


def _arrays(graph, weight, csr) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray], np.ndarray]:
    """The kernels' argument types, so that numba compiles (and caches) one version of each."""
    off, idx = csr
    return (np.ascontiguousarray(graph.topo_order, dtype=np.int64),
            (np.ascontiguousarray(off, dtype=np.int64), np.ascontiguousarray(idx, dtype=np.int64)),
            np.ascontiguousarray(weight, dtype=np.float64))


def _comm(comm: np.ndarray | None, n: int) -> np.ndarray:
    """Edge costs as float64, zeros when there are none (x + 0.0 is x: the sums are those without costs)."""
    return np.zeros(n) if comm is None else np.ascontiguousarray(comm, dtype=np.float64)


@njit(cache=True)
def _downward(order, p_off, p_idx, w, c):
    rank = np.zeros(len(w))
    for i in order:
        best = 0.0
        for e in range(p_off[i], p_off[i + 1]):
            j = p_idx[e]
            if rank[j] + w[j] + c[j] > best:
                best = rank[j] + w[j] + c[j]
        rank[i] = best
    return rank


@njit(cache=True)
def _upward(order, s_off, s_idx, w, c):
    rank = np.zeros(len(w))
    for r in range(len(order) - 1, -1, -1):
        i = order[r]
        best = 0.0
        for e in range(s_off[i], s_off[i + 1]):
            j = s_idx[e]
            if c[i] + rank[j] > best:
                best = c[i] + rank[j]
        rank[i] = w[i] + best
    return rank


@njit(cache=True)
def _critical_path(order, p_off, p_idx, w):
    top = _downward(order, p_off, p_idx, w, np.zeros(len(w)))
    best = 0.0
    for i in order:
        if top[i] + w[i] > best:
            best = top[i] + w[i]
    return best
