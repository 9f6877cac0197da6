"""What one step of a GraphDef runs: its fetches, found or given, and the nodes none of them needs.

TensorFlow runs a `tf.function` as its function runtime does: the function's
outputs and every stateful op (`PruneFunctionBody`), nothing else. A
`tf.function`'s GraphDef (``concrete_function.graph.as_graph_def()``) keeps
its outputs as ``Identity`` nodes named ``Identity``, ``Identity_1``, ...
that nothing reads (TensorFlow adds one per returned tensor), so
`function_fetches` finds them there. A TF1 graph's fetches are a session's
(the train op, the loss): nothing in the graph says which they are.
"""

from __future__ import annotations

import re
from collections import Counter

from placer.errors import ModelImportError

_OUTPUT_NAME = re.compile(r"Identity(_\d+)?")
_TF1_TYPES = {"VariableV2", "Variable", "VarIsInitializedOp", "VarHandleOp"}
"""Ops of TF1 graphs (variables, initializer checks): a `tf.function` captures its variables as placeholders."""


def node_of(name: str) -> str:
    """The node a NodeDef input or a fetch names: ``"^train"``, ``"loss:0"``, ``"loss"`` -> the node's name."""
    return name.lstrip("^").partition(":")[0]


def function_fetches(graph_def) -> list[str] | None:
    """The outputs of a `tf.function`'s GraphDef (its ``Identity`` / ``Identity_N`` nodes that no node
    reads), or None when `graph_def` does not look like one: none such, or signs of a TF1 graph (its own
    variables, or a ``NoOp`` nothing reads: a train op, which a session fetches).

    Its stateful ops run too (`prune` with ``keep_stateful=True``): they are not listed here.
    """
    read = {node_of(i) for n in graph_def.node for i in n.input}
    if any(n.op in _TF1_TYPES or (n.op == "NoOp" and n.name not in read) for n in graph_def.node):
        return None
    outputs = [n.name for n in graph_def.node
               if n.op == "Identity" and n.name not in read and _OUTPUT_NAME.fullmatch(n.name)]
    return outputs or None


def prune(graph_def, fetches: list[str], keep_stateful: bool = True):
    """`graph_def` without the nodes one step that fetches `fetches` does not run, and their count by type.

    A node runs if a fetch needs it (through data or control inputs), or, with `keep_stateful` (a
    function's rule), if it is stateful: the seeds TensorFlow's function runtime keeps
    (`PruneFunctionBody`). A session runs only what its fetches need. (`tf.compat.v1.graph_util
    .extract_sub_graph` would also keep every node a kept one is colocated with, which neither runs.)

    Raises
    ------
    ModelImportError
        If a fetch names no node.
    """
    from tensorflow.python.framework import op_def_registry

    by_name = {n.name: n for n in graph_def.node}
    missing = [f for f in fetches if f not in by_name]
    if missing:
        raise ModelImportError(f"fetch {missing[0]!r} names no node of the graph"
                               + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))

    def stateful(node) -> bool:
        op_def = op_def_registry.get(node.op)
        return op_def is not None and op_def.is_stateful

    live = set(fetches) | ({n.name for n in graph_def.node if stateful(n)} if keep_stateful else set())
    stack = list(live)
    while stack:
        for src in by_name[stack.pop()].input:
            p = node_of(src)
            if p not in live:
                live.add(p)
                stack.append(p)
    dead = Counter(n.op for n in graph_def.node if n.name not in live)
    if not dead:
        return graph_def, dead
    kept = type(graph_def)()
    kept.CopyFrom(graph_def)
    del kept.node[:]
    kept.node.extend(n for n in graph_def.node if n.name in live)
    return kept, dead
