"""OpGraph: the DAG of ops that every placer reads and the simulator runs.

An op carries what placement needs to know about it: its type, the ops it
reads from, the sizes it produces and owns, and how long it takes per device
kind. `OpGraph.from_dict` validates everything and names the offending op in
its error, so a bad file never reaches a placer.
"""

from __future__ import annotations

import heapq
import math
import sys
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Iterator

import numpy as np

from placer.errors import GraphError


@dataclass(slots=True)
class Op:
    """One op of a computation graph.

    Attributes
    ----------
    name : unique name within the graph (TensorFlow's node name).
    op : op type (``"Conv2D"``, ``"MatMul"``, ...).
    inputs : names of the ops whose outputs this op reads (no ``:1`` or ``^``).
    output_shapes : shape of each output, batch dimension filled in.
    output_bytes : total bytes of all outputs.
    flops : floating-point operations of one execution.
    param_bytes : bytes of weights (or other state) the op owns on its device.
    cost : measured or modelled seconds per device kind, e.g. ``{"gpu": 1e-4}``.
    colocation : ops with the same key must share a device.
    transfer_time : seconds to send this op's output over any link; when set it
        replaces latency + bytes / bandwidth (profiled datasets give it).
    """

    name: str
    op: str
    inputs: list[str] = field(default_factory=list)
    output_shapes: list[list[int]] = field(default_factory=list)
    output_bytes: float = 0.0
    flops: float = 0.0
    param_bytes: float = 0.0
    cost: dict[str, float] = field(default_factory=dict)
    colocation: str | None = None
    transfer_time: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The op as a JSON-ready dict; optional fields are left out when unset."""
        d: dict[str, Any] = {
            "name": self.name,
            "op": self.op,
            "inputs": list(self.inputs),
            "output_shapes": [list(s) for s in self.output_shapes],
            "output_bytes": _plain_number(self.output_bytes),
            "flops": _plain_number(self.flops),
            "param_bytes": _plain_number(self.param_bytes),
        }
        if self.cost:
            d["cost"] = dict(self.cost)
        if self.colocation is not None:
            d["colocation"] = self.colocation
        if self.transfer_time is not None:
            d["transfer_time"] = self.transfer_time
        return d


class OpGraph:
    """A validated DAG of ops.

    Parameters
    ----------
    name : the graph's name.
    ops : the ops, in any order; their names must be unique.
    meta : free-form facts about the graph (source model, batch, what an
        importer folded...).

    Raises
    ------
    GraphError
        If the graph is empty, a name repeats, an input names a missing op, a
        size or cost is negative or not finite, or the ops form a cycle.
    """

    def __init__(self, name: str, ops: list[Op], meta: dict[str, Any] | None = None):
        if not isinstance(name, str) or not name:
            raise GraphError("graph: 'name' must be a non-empty string")
        self.name = name
        self.ops = list(ops)
        self.meta = dict(meta or {})
        if not self.ops:
            raise GraphError(f"graph {name!r}: has no ops")
        self.index: dict[str, int] = {}
        for i, op in enumerate(self.ops):
            _check_op(op)
            if op.name in self.index:
                raise GraphError(f"op {op.name!r}: duplicate name")
            self.index[op.name] = i
        for op in self.ops:
            for src in op.inputs:
                if src not in self.index:
                    raise GraphError(f"op {op.name!r}: input {src!r} names no op in the graph")
                if src == op.name:
                    raise GraphError(f"op {op.name!r}: reads its own output (a cycle)")
        _check_totals(self)
        self.topo_order  # raises on a cycle

    # -- size and access -------------------------------------------------
    def __len__(self) -> int:
        return len(self.ops)

    def __iter__(self) -> Iterator[Op]:
        return iter(self.ops)

    def __getitem__(self, name: str) -> Op:
        return self.ops[self.index[name]]

    @property
    def names(self) -> list[str]:
        return [op.name for op in self.ops]

    @property
    def num_edges(self) -> int:
        return int(self.predecessors[0][-1])

    # -- structure (computed once; the graph is not mutated after construction)
    @cached_property
    def predecessors(self) -> tuple[np.ndarray, np.ndarray]:
        """CSR ``(offsets, indices)`` of each op's distinct producers."""
        offsets = np.zeros(len(self.ops) + 1, dtype=np.int64)
        flat: list[int] = []
        for i, op in enumerate(self.ops):
            srcs = sorted({self.index[s] for s in op.inputs})
            flat.extend(srcs)
            offsets[i + 1] = len(flat)
        return offsets, np.asarray(flat, dtype=np.int64)

    @cached_property
    def param_bytes(self) -> np.ndarray:
        """``[num_ops]`` float64 (read-only): each op's weight bytes."""
        return _read_only(np.array([op.param_bytes for op in self.ops], dtype=np.float64))

    @cached_property
    def output_bytes(self) -> np.ndarray:
        """``[num_ops]`` float64 (read-only): each op's output bytes."""
        return _read_only(np.array([op.output_bytes for op in self.ops], dtype=np.float64))

    @cached_property
    def successors(self) -> tuple[np.ndarray, np.ndarray]:
        """CSR ``(offsets, indices)`` of each op's distinct consumers."""
        p_off, p_idx = self.predecessors
        n = len(self.ops)
        dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(p_off))
        order = np.lexsort((dst, p_idx))
        counts = np.bincount(p_idx, minlength=n)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        return offsets, dst[order]

    @cached_property
    def topo_order(self) -> np.ndarray:
        """Op indices in topological order; among ready ops, file order first.

        Raises
        ------
        GraphError
            If the ops form a cycle (the message names an op on it).
        """
        p_off, _ = self.predecessors
        s_off, s_idx = self.successors
        indeg = np.diff(p_off).tolist()
        heap = [i for i, d in enumerate(indeg) if d == 0]
        heapq.heapify(heap)
        order: list[int] = []
        s_off_l, s_idx_l = s_off.tolist(), s_idx.tolist()
        while heap:
            i = heapq.heappop(heap)
            order.append(i)
            for j in s_idx_l[s_off_l[i]:s_off_l[i + 1]]:
                indeg[j] -= 1
                if indeg[j] == 0:
                    heapq.heappush(heap, j)
        if len(order) != len(self.ops):
            cycle = [self.ops[i].name for i in self._a_cycle(indeg)]
            shown = " -> ".join(repr(n) for n in cycle[:8]) + (" -> ..." if len(cycle) > 8 else "")
            raise GraphError(f"op {cycle[0]!r}: is on a cycle ({shown} -> {cycle[0]!r})")
        return np.asarray(order, dtype=np.int64)

    def _a_cycle(self, indeg: list[int]) -> list[int]:
        """One cycle, in data-flow order, among the ops a topological sort left with inputs pending.

        Such an op is on a cycle or only downstream of one; walking back through
        producers that are also pending must come round, and where it does is a
        cycle, so the error names an op that is really on it.
        """
        p_off, p_idx = self.predecessors
        i = next(k for k, d in enumerate(indeg) if d > 0)
        walk: list[int] = []
        seen: dict[int, int] = {}
        while i not in seen:
            seen[i] = len(walk)
            walk.append(i)
            i = next(int(p) for p in p_idx[p_off[i]:p_off[i + 1]] if indeg[p] > 0)
        return walk[seen[i]:][::-1]

    @cached_property
    def topo_rank(self) -> np.ndarray:
        """Position of each op in `topo_order` (the simulator's tie-breaker)."""
        rank = np.empty(len(self.ops), dtype=np.int64)
        rank[self.topo_order] = np.arange(len(self.ops))
        return rank

    @cached_property
    def colocation_ids(self) -> np.ndarray:
        """``[num_ops]`` int64 (read-only): a dense group id per op, one per colocation key and one per op
        without a key (what grouping starts from: ops that must share a device share a group)."""
        gid = np.full(len(self.ops), -1, dtype=np.int64)
        for members in self.colocation_groups().values():
            gid[members] = members[0]
        free = gid < 0
        gid[free] = np.nonzero(free)[0]
        _, dense = np.unique(gid, return_inverse=True)
        return _read_only(dense.astype(np.int64))

    def colocation_groups(self) -> dict[str, list[int]]:
        """Op indices per colocation key (ops without a key are left out)."""
        groups: dict[str, list[int]] = {}
        for i, op in enumerate(self.ops):
            if op.colocation is not None:
                groups.setdefault(op.colocation, []).append(i)
        return groups

    @cached_property
    def fingerprint(self) -> str:
        """A short hash of the ops (names, types, inputs, sizes, costs, colocation; not `name` or `meta`).

        A saved training run records it, so that resuming on another graph
        that happens to share its name and op count is refused rather than
        trained on groups and placements made for the first.
        """
        import hashlib
        import json

        nodes = json.dumps([op.to_dict() for op in self.ops], sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(nodes.encode()).hexdigest()[:16]

    # -- conversion ------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The graph in the JSON file format (see ``placer/schemas/graph.schema.json``)."""
        return {"name": self.name, "nodes": [op.to_dict() for op in self.ops], "meta": self.meta}

    @classmethod
    def from_dict(cls, data: Any) -> "OpGraph":
        """Build and validate a graph from the JSON file format.

        Raises
        ------
        GraphError
            Naming the op (or top-level key) that is wrong.
        """
        if not isinstance(data, dict):
            raise GraphError("graph: expected a JSON object with 'name' and 'nodes'")
        unknown = set(data) - _GRAPH_KEYS  # as for ops: a misspelt key must not be dropped silently
        if "devices" in data and "nodes" not in data:
            if isinstance(data["devices"], list):
                raise GraphError("graph: this is a cluster ('devices' lists the machine's devices), not a graph; "
                                 "--cluster FILE reads one")
            raise GraphError("graph: this is a placement ('devices' maps ops to devices), not a graph; "
                             "`placer simulate GRAPH --placement FILE` reads one")
        if unknown:
            raise GraphError(f"graph: unknown top-level field(s) {sorted(unknown)} (a graph has "
                             f"{', '.join(sorted(_GRAPH_KEYS))}; put other data in 'meta')")
        name = data.get("name")
        nodes = data.get("nodes")
        meta = data.get("meta", {})
        if not isinstance(name, str) or not name:
            raise GraphError("graph: 'name' must be a non-empty string")
        if not isinstance(nodes, list):
            raise GraphError("graph: 'nodes' must be a list of ops")
        if not isinstance(meta, dict):
            raise GraphError("graph: 'meta' must be an object")
        _check_meta(meta)
        ops = [_op_from_dict(node, k) for k, node in enumerate(nodes)]
        return cls(name, ops, meta)

    def to_networkx(self):
        """A `networkx.DiGraph` with one node per op (its fields as attributes)."""
        import networkx as nx

        g = nx.DiGraph(name=self.name, meta=self.meta)
        for op in self.ops:
            attrs = op.to_dict()
            attrs.pop("name")
            g.add_node(op.name, **attrs)
        for op in self.ops:
            for src in dict.fromkeys(op.inputs):
                g.add_edge(src, op.name)
        return g

    @classmethod
    def from_networkx(cls, g) -> "OpGraph":
        """Inverse of `to_networkx`; edges become inputs when a node lists none."""
        nodes = []
        for name, attrs in g.nodes(data=True):
            d = dict(attrs)
            d["name"] = name
            d.setdefault("op", "Unknown")
            if "inputs" not in d:
                d["inputs"] = list(g.predecessors(name))
            nodes.append(d)
        return cls.from_dict(
            {"name": g.graph.get("name") or "graph", "nodes": nodes, "meta": g.graph.get("meta", {})}
        )

    def __repr__(self) -> str:
        return f"OpGraph({self.name!r}, {len(self.ops)} ops, {self.num_edges} edges)"


# -- validation helpers ---------------------------------------------------
_OP_KEYS = {
    "name", "op", "inputs", "output_shapes", "output_bytes", "flops",
    "param_bytes", "cost", "colocation", "transfer_time",
}


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def _plain_number(x: float) -> int | float:
    """Integral floats written as ints, so files stay short and exact."""
    return int(x) if float(x).is_integer() and abs(x) < 2**53 else float(x)


def _number(value: Any, what: str, where: str) -> float:
    """A finite non-negative number, or a GraphError naming op and field."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise GraphError(f"{where}: {what} must be a number, got {type(value).__name__}")
    try:
        finite = math.isfinite(value)
    except OverflowError:  # a JSON integer with hundreds of digits: no float holds it
        raise GraphError(f"{where}: {what} must be finite, got an integer too large for a float") from None
    if not finite:
        raise GraphError(f"{where}: {what} must be finite, got {value}")
    if value < 0:
        raise GraphError(f"{where}: {what} must not be negative, got {value}")
    return float(value)


_GRAPH_KEYS = frozenset({"name", "nodes", "meta"})
MAX_META_DEPTH = 32
"""How deeply a graph's free-form ``meta`` may nest (importers write 2 levels)."""


def _check_meta(meta: dict) -> None:
    """A GraphError unless `meta`, stored as given, comes back out as given: nested at most `MAX_META_DEPTH`
    levels (deep JSON breaks encoders) and holding no NaN or infinity (JSON writes them as null). One walk,
    without recursion, that goes no deeper than the limit."""
    stack: list[tuple[Any, int, str]] = [(meta, 0, "")]
    while stack:
        v, d, path = stack.pop()
        if isinstance(v, float) and not math.isfinite(v):
            raise GraphError(f"graph: 'meta.{path}' is not a finite number (JSON has no NaN or infinity)")
        if isinstance(v, (dict, list)):
            if d + 1 > MAX_META_DEPTH:
                raise GraphError(f"graph: 'meta' is nested more than {MAX_META_DEPTH} levels deep")
            items = v.items() if isinstance(v, dict) else enumerate(v)
            stack.extend((x, d + 1, f"{path}.{k}" if path else str(k)) for k, x in items)


def _op_from_dict(node: Any, k: int) -> Op:
    """Parse one node of the file format; errors name the op (or its position)."""
    if not isinstance(node, dict):
        raise GraphError(f"node #{k}: expected an object, got {type(node).__name__}")
    name = node.get("name")
    if not isinstance(name, str) or not name:
        raise GraphError(f"node #{k}: 'name' must be a non-empty string")
    where = f"op {name!r}"
    unknown = set(node) - _OP_KEYS
    if unknown:
        raise GraphError(f"{where}: unknown field(s) {sorted(unknown)}")
    op_type = node.get("op")
    if not isinstance(op_type, str) or not op_type:
        raise GraphError(f"{where}: 'op' must be a non-empty string")
    inputs = node.get("inputs", [])
    if not isinstance(inputs, list) or not all(isinstance(s, str) for s in inputs):
        raise GraphError(f"{where}: 'inputs' must be a list of op names")
    shapes = node.get("output_shapes", [])
    if not isinstance(shapes, list) or not all(
        isinstance(s, list) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in s)
        for s in shapes
    ):
        raise GraphError(f"{where}: 'output_shapes' must be a list of shapes of non-negative ints")
    cost = node.get("cost", {})
    if not isinstance(cost, dict):
        raise GraphError(f"{where}: 'cost' must be an object of device kind -> seconds")
    cost = {str(kind): _number(v, f"cost[{kind!r}]", where) for kind, v in cost.items()}
    colocation = node.get("colocation")
    if colocation is not None and not isinstance(colocation, str):
        raise GraphError(f"{where}: 'colocation' must be a string or null")
    tt = node.get("transfer_time")
    return Op(
        name=name,
        op=op_type,
        inputs=list(inputs),
        output_shapes=[list(s) for s in shapes],
        output_bytes=_number(node.get("output_bytes", 0), "'output_bytes'", where),
        flops=_number(node.get("flops", 0), "'flops'", where),
        param_bytes=_number(node.get("param_bytes", 0), "'param_bytes'", where),
        cost=cost,
        colocation=colocation,
        transfer_time=None if tt is None else _number(tt, "'transfer_time'", where),
    )


def _check_totals(graph: OpGraph) -> None:
    """Refuse sizes and costs whose sums over the graph overflow a float.

    Each is finite alone, but the simulator adds them up (a device's memory, its busy time), and an
    infinite sum came out as a step time or peak memory of ``Infinity``: ``null`` in the service's
    answers, and a placement file no JSON reader (nor ``placer simulate``) accepts.
    """
    totals: dict[str, float] = {
        "'output_bytes' + 'param_bytes'": sum(op.output_bytes + op.param_bytes for op in graph.ops),
        "'flops'": sum(op.flops for op in graph.ops),
        "'transfer_time'": sum(op.transfer_time or 0.0 for op in graph.ops),
    }
    for op in graph.ops:
        for kind, v in op.cost.items():
            totals[f"cost[{kind!r}]"] = totals.get(f"cost[{kind!r}]", 0.0) + v
    for what, total in totals.items():
        if not math.isfinite(total):
            raise GraphError(f"graph {graph.name!r}: the ops' {what} add up to more than a float holds "
                             f"(about {sys.float_info.max:.3g}); the sizes or costs are far too large")


def _check_op(op: Op) -> None:
    """Checks for ops built in Python rather than parsed (same rules, same messages)."""
    where = f"op {op.name!r}"
    if not isinstance(op.name, str) or not op.name:
        raise GraphError("op: 'name' must be a non-empty string")
    for what in ("output_bytes", "flops", "param_bytes"):
        _number(getattr(op, what), f"'{what}'", where)
    for kind, v in op.cost.items():
        _number(v, f"cost[{kind!r}]", where)
    if op.transfer_time is not None:
        _number(op.transfer_time, "'transfer_time'", where)
