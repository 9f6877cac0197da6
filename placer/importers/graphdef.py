"""TensorFlow `GraphDef` -> `OpGraph`: shapes, bytes, FLOPs, weights, colocation.

Shapes come from TensorFlow's own shape inference: the GraphDef is imported
into a fresh `tf.Graph` (with the batch filled into its placeholders), and
each op's output shapes are read back. Two things help inference along:

- variables captured by a `tf.function` appear as ``Placeholder`` nodes of
  dtype ``resource`` whose shape TensorFlow does not know after a round trip
  through a GraphDef; for inference only, each is stood in for by a
  ``VarHandleOp`` of the variable's shape (given, or read from the
  ``_output_shapes`` attribute of the ops that read it, which TF writes with
  ``as_graph_def(add_shapes=True)``);
- where inference leaves a dimension unknown, the node's ``_output_shapes``
  attribute is used if it is fully defined.

What is still unknown is an error naming the op if the tensor holds floats:
with the inputs' shapes all given, such a dimension depends on the data
(the rows an ``UnsortedSegmentSum`` of a sparse update produces), and only
an estimate can fill it (``unknown_dim``: ``placer import --unknown-dim N``),
never silently. A variable read of unknown shape stays an error even then
(the GraphDef was written without ``add_shapes=True``): a guessed weight size
would be a wrong graph. Estimated dimensions are recorded in
``meta["unknown_dims"]`` (the estimate, the ops); ``allow_unknown_shapes``
(for tools that run a graph rather than size it) sets them to 1 and records
them the same way. Integer index tensors of data-dependent size
(``BroadcastGradientArgs``) get 1s. Every such op is listed in
``meta["unknown_shape_ops"]``. A resource placeholder read by an op but of
no known shape (not a variable read through a ``ReadVariableOp`` with
``_output_shapes``: a table, or a variable only ``ResourceGather`` reads)
weighs 0 bytes and is listed in ``meta["unsized_resources"]``.

Calls of nested `tf.function`s (``StatefulPartitionedCall``) are inlined
first, as TensorFlow's runtime does, so their ops are counted and placed;
``meta["inlined_function_calls"]`` says how many. Functions compiled with
XLA (``tf.function(jit_compile=True)``; Keras 3 wraps grouped convolutions
so) are inlined too: TensorFlow would run each as one XLA cluster, but its
ops are the step's FLOPs. Functional loops and conditionals (``While``,
``If``) stay single ops (FLOPs by the fallback, counted in
``meta["function_call_ops"]``): build RNNs unrolled.

Folding (default ``Const`` and ``NoOp``): a folded node is removed; its bytes
become weight bytes (`param_bytes`) of each consumer (a constant lives where
it is used), and the node's own inputs (control dependencies) pass on to its
consumers as inputs, so no ordering is lost. ``meta["folded"]`` counts them
and ``meta["tf_node_count"]`` is the number of nodes TensorFlow had, so
``tf_node_count - sum(folded.values()) == op_count``.

Pruning (when the step's ``fetches`` are known: `from_tf_function` gives its
outputs and control outputs): a node that no fetch needs, through data or
control inputs, and that is not stateful is removed before anything else, as
TensorFlow's function runtime and grappler remove it before running a step
(a call of a nested function is kept or removed whole). With ``session=True``
(a TF1 session's fetches: `placer import --fetch`) stateful nodes no fetch
needs go too, as a session does not run them (variable initializers).
Keras 3 training steps hold such nodes: the gradient of the first layer with
respect to the input images (a large convolution), the optimizer's unused
``Identity`` copies of every gradient, and in EfficientNet-B0 elementwise
activation-gradient ops that nothing reads (their cost: docs/importing.md).
``meta["pruned"]`` counts them by type, ``meta["fetches"]`` keeps
the fetches (a measurement runs them), and then
``tf_node_count - sum(folded.values()) - sum(pruned.values()) == op_count``.
A bare GraphDef does not say what a step fetches (a session's fetches do), so
without ``fetches`` nothing is pruned, unless ``find_fetches`` finds a
`tf.function`'s outputs in it (`placer.importers.fetches.function_fetches`):
then its outputs and stateful ops are what runs (``meta["fetches_from"]``).

Control dependencies: the OpGraph has one kind of edge, and an edge means
"this op reads that op's output" to the simulator (a transfer across devices,
a tensor kept alive until its last reader). So a control dependency becomes
an input only when its producer outputs nothing (an assign, a NoOp): then it
orders ops at the cost of a link's latency, as TF's control Send/Recv does.
A control dependency on an op with outputs (``tf.function`` makes its output
``Identity`` wait on every variable read) is left out, as it would move and
pin the whole tensor. ``meta["control_edges"]`` and
``meta["control_edges_dropped"]`` count both kinds.

Shape inference is `placer.importers.shapes`, call inlining
`placer.importers.function_calls`; this module builds the ops from them.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Mapping

from placer.errors import ModelImportError
from placer.graph import Op, OpGraph
from placer.importers.colocation import colocation_keys
from placer.importers.fetches import function_fetches, node_of, prune
from placer.importers.flops import CONTRACTIONS, OpInfo, op_flops
from placer.importers.function_calls import CALL_TYPES, CONTROL_FLOW_TYPES, check_op_types, inline_function_calls
from placer.importers.shapes import (import_for_inference, inference_copy, resolve_variable_shapes, shape_list,
                                     static_shape)

__all__ = ["DEFAULT_FOLD", "FLOP_UNIT", "from_graphdef", "from_graphdef_bytes", "from_graphdef_text", "node_of"]

DEFAULT_FOLD = ("Const", "NoOp")
FLOP_UNIT = "FLOP (one multiply-add counts 2)"
_VARIABLE_TYPES = {"VarHandleOp", "VariableV2", "Variable"}
_SMALL_CONST = 16  # elements: the largest constant input whose value FLOP rules may read
_RULE_ATTRS = ("transpose_a", "transpose_b", "adj_x", "adj_y", "equation", "ksize", "data_format",
               "is_training")


# -- entry points -------------------------------------------------------------
def from_graphdef_bytes(data: bytes, name: str, **options: Any) -> OpGraph:
    """Import a serialized (binary) `GraphDef`.

    Parameters
    ----------
    data : the bytes of a ``.pb`` file (``GraphDef.SerializeToString()``).
    name : the graph's name.
    **options : passed to `from_graphdef` (``batch_size``, ``input_shapes``...).

    Raises
    ------
    ModelImportError
        If the bytes are not a GraphDef (corrupt or truncated protobuf, another file type).
    """
    from google.protobuf.message import DecodeError
    from tensorflow.core.framework import graph_pb2

    graph_def = graph_pb2.GraphDef()
    try:
        graph_def.ParseFromString(bytes(data))
    except (DecodeError, RuntimeError, ValueError) as e:
        raise ModelImportError(f"not a valid binary GraphDef (corrupt or truncated protobuf: {e})") from None
    return from_graphdef(graph_def, name, **options)


def from_graphdef_text(data: bytes | str, name: str, **options: Any) -> OpGraph:
    """Import a `GraphDef` in protobuf text format (``.pbtxt``)."""
    from google.protobuf import text_format
    from tensorflow.core.framework import graph_pb2

    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ModelImportError("not a text GraphDef (binary data)") from None
    graph_def = graph_pb2.GraphDef()
    try:
        text_format.Parse(data, graph_def)
    except text_format.ParseError as e:
        raise ModelImportError(f"not a valid text GraphDef ({str(e).splitlines()[0]})") from None
    return from_graphdef(graph_def, name, **options)


def from_graphdef(
    graph_def,
    name: str,
    *,
    batch_size: int | None = None,
    input_shapes: Mapping[str, Iterable[int]] | None = None,
    variable_shapes: Mapping[str, tuple[Iterable[int], Any]] | None = None,
    fold: Iterable[str] = DEFAULT_FOLD,
    allow_unknown_shapes: bool = False,
    unknown_dim: int | None = None,
    fetches: Iterable[str] | None = None,
    find_fetches: bool = False,
    session: bool = False,
    meta: Mapping[str, Any] | None = None,
) -> OpGraph:
    """Turn a TensorFlow `GraphDef` into an `OpGraph`, keeping TF's node names.

    Parameters
    ----------
    graph_def : a ``tensorflow.core.framework.graph_pb2.GraphDef``.
    name : the graph's name.
    batch_size : fills an unknown first dimension of every placeholder.
    input_shapes : full shapes of placeholders by node name (win over `batch_size`).
    variable_shapes : ``{placeholder name: (shape, dtype)}`` for resource placeholders
        standing for variables; by default read from the graph's ``_output_shapes``.
    fold : op types folded into their consumers (see the module docstring).
    allow_unknown_shapes : set dimensions shape inference cannot fix to 1, and
        leave unknown variables at 0 bytes, instead of raising: for running a
        graph, not sizing it (recorded in ``meta["unknown_dims"]``).
    unknown_dim : the estimate for a float tensor's dimension that no input shape fixes (data-dependent),
        and for placeholders' unknown dimensions after the first (the batch); recorded in
        ``meta["unknown_dims"]``. Default: such a dimension is an error.
    fetches : names of the nodes one step runs (a `tf.function`'s outputs and control outputs, a
        session's fetches and targets); nodes none of them needs are pruned (see the module docstring).
        A tensor name (``loss:0``) or a control input (``^train``) stands for its node.
        Default: nothing is pruned (but see `find_fetches`).
    find_fetches : without `fetches`, take a `tf.function` GraphDef's outputs as them
        (`placer.importers.fetches.function_fetches`); a graph that does not look like one keeps every node.
    session : the fetches are a TF1 session's: a step runs what they need and nothing else, so a
        stateful node none of them needs (a variable's initializer) is pruned too. By default they are a
        function's, which also runs every stateful node.
    meta : extra facts for the graph's ``meta`` (source model...).

    Returns
    -------
    OpGraph
        Ops carry type, inputs, output shapes and bytes, FLOPs, weight bytes and
        colocation keys; ``cost`` is left empty so the simulator's roofline applies.

    Raises
    ------
    ModelImportError
        If the graph is empty, a placeholder's shape is unknown and not given,
        TensorFlow cannot import it (unknown op type, dangling input...), an
        output shape stays unknown, or a fetch names no node.
    """
    import tensorflow as tf

    if not graph_def.node:
        raise ModelImportError("GraphDef has no nodes")
    check_op_types(graph_def, tf)
    if unknown_dim is not None and (isinstance(unknown_dim, bool) or not isinstance(unknown_dim, int)
                                    or unknown_dim < 1):
        raise ModelImportError(f"the estimate of unknown dimensions (--unknown-dim) must be a positive integer, "
                               f"got {unknown_dim!r}")
    pruned: Counter[str] = Counter()
    tensor_fetches: list[str] = []
    fetches_from = "given"
    if fetches is None and find_fetches:
        fetches = function_fetches(graph_def)
        fetches_from = "tf.function outputs"
    if fetches is not None:  # before inlining: fetches name the caller's nodes, calls among them
        tensor_fetches = [f for f in fetches if ":" in f]
        fetches = list(dict.fromkeys(node_of(f) for f in fetches))
        graph_def, pruned = prune(graph_def, fetches, keep_stateful=not session)
    graph_def, inlined = inline_function_calls(graph_def)
    tf_node_count = len(graph_def.node) + sum(pruned.values())
    nodes = list(graph_def.node)
    fold = set(fold)
    input_shapes = {k: [int(d) for d in v] for k, v in (input_shapes or {}).items()}
    known_names = {n.name for n in nodes}
    for missing in sorted(set(input_shapes) - known_names):
        raise ModelImportError(f"input shape given for {missing!r}, which is no node of the graph")

    var_shapes = resolve_variable_shapes(nodes, variable_shapes)
    estimate = 1 if allow_unknown_shapes else unknown_dim
    estimated: list[str] = []  # ops with a dimension set to `estimate`
    unsized = {n.name for n in nodes if n.op == "Placeholder" and n.name not in var_shapes
               and n.attr["dtype"].type == tf.resource.as_datatype_enum}  # resources of unknown shape
    inference_def, inputs_meta = inference_copy(graph_def, batch_size, input_shapes, var_shapes,
                                                allow_unknown_shapes, unknown_dim, estimated)
    tf_graph = import_for_inference(inference_def, tf)

    # -- per-node facts from the imported graph
    unknown_ops: list[str] = []
    node_by_name = {n.name: n for n in nodes}
    shapes: dict[str, list[list[int]]] = {}
    dtypes: dict[str, list[Any]] = {}
    for tf_op in tf_graph.get_operations():
        outs = []
        for k, t in enumerate(tf_op.outputs):
            outs.append(static_shape(t, node_by_name[tf_op.name], k, allow_unknown_shapes, unknown_ops,
                                     unknown_dim, estimated, unsized))
        shapes[tf_op.name] = outs
        dtypes[tf_op.name] = [t.dtype for t in tf_op.outputs]
    for f in tensor_fetches:  # a session refuses a tensor its node does not have (loss:1, train:0 of a NoOp)
        node_name, _, index = f.lstrip("^").partition(":")
        if node_name in shapes and (not index.isdigit() or int(index) >= len(shapes[node_name])):
            raise ModelImportError(f"fetch {f!r}: node {node_name!r} has {len(shapes[node_name])} output(s), "
                                   f"so no tensor {node_name}:{index}")

    def out_bytes(node_name: str) -> float:
        return float(sum(_n(s) * _dtype_size(dt) for s, dt in zip(shapes[node_name], dtypes[node_name])))

    # -- folding: which producer(s) stand for each node
    folded = {n.name for n in nodes if n.op in fold}
    parsed = {n.name: _parse_inputs(n.input) for n in nodes}
    stand_in: dict[str, list[str]] = {}

    def resolve(src: str) -> list[str]:
        if src not in folded:
            return [src]
        if src not in stand_in:
            stand_in[src] = []  # guards against cycles through folded nodes
            data, control = parsed[src]
            stand_in[src] = list(dict.fromkeys(p for s, _ in data for p in resolve(s)))
            stand_in[src] += [p for s in control for p in resolve(s) if p not in stand_in[src]]
        return stand_in[src]

    # -- build the ops
    ops: list[Op] = []
    fallbacks: Counter[str] = Counter()
    control_edges = 0
    dropped_control = 0
    folded_bytes = 0.0
    variable_bytes = 0.0
    contraction_flops = 0.0
    for node in nodes:
        if node.name in folded:
            continue
        data, control = parsed[node.name]
        inputs: list[str] = []
        param_bytes = 0.0
        for src, _ in data:
            if src in folded and node_by_name[src].op == "Const":
                b = out_bytes(src)
                param_bytes += b
                folded_bytes += b
            inputs.extend(resolve(src))
        inputs = list(dict.fromkeys(inputs))
        for src in control:
            for p in resolve(src):
                if p in inputs or p == node.name:
                    continue
                if out_bytes(p) > 0:
                    dropped_control += 1  # would read as a data edge: a transfer and a longer-lived tensor
                    continue
                inputs.append(p)
                control_edges += 1
        inputs = [p for p in inputs if p != node.name]
        if node.op in _VARIABLE_TYPES or node.name in var_shapes:
            vb = _variable_bytes(node, var_shapes, shapes[node.name], tf)
            param_bytes += vb
            variable_bytes += vb
        info = OpInfo(
            type=node.op,
            attrs=_rule_attrs(node),
            inputs=[shapes[src][k] if k < len(shapes[src]) else [] for src, k in data],
            outputs=shapes[node.name],
            input_values=[_small_const_value(node_by_name[src], shapes[src]) for src, _ in data],
        )
        flops, fell_back = op_flops(info)
        if fell_back:
            fallbacks[node.op] += 1
        if node.op in CONTRACTIONS:
            contraction_flops += flops
        ops.append(Op(
            name=node.name, op=node.op, inputs=inputs, output_shapes=shapes[node.name],
            output_bytes=out_bytes(node.name), flops=flops, param_bytes=param_bytes,
        ))

    keys = colocation_keys(nodes, folded, parsed, dtypes, var_shapes)
    for op in ops:
        op.colocation = keys.get(op.name)

    info_meta: dict[str, Any] = {
        "source": "TensorFlow GraphDef",
        "tf_node_count": tf_node_count,
        "op_count": len(ops),
        "folded": dict(sorted(Counter(node_by_name[n].op for n in folded).items())),
        **({"fetches": list(fetches), "fetches_from": fetches_from, "pruned": dict(sorted(pruned.items())),
            "prune_rule": "session" if session else "function"} if fetches is not None else {}),
        "folded_const_bytes": folded_bytes,
        "control_edges": control_edges,
        "control_edges_dropped": dropped_control,
        "flop_unit": FLOP_UNIT,
        "total_flops": float(sum(op.flops for op in ops)),
        "contraction_flops": contraction_flops,
        "flops_fallback": dict(sorted(fallbacks.items())),
        "flops_fallback_ops": int(sum(fallbacks.values())),
        "param_bytes": float(sum(op.param_bytes for op in ops)),
        "variable_bytes": variable_bytes,
        "variables": len([n for n in nodes if n.op in _VARIABLE_TYPES or n.name in var_shapes]),
        "colocation_groups": len(set(keys.values())),
        "inputs": inputs_meta,
        "batch_size": batch_size,
    }
    if unknown_ops:
        info_meta["unknown_shape_ops"] = unknown_ops
    read = {node_of(i) for n in nodes for i in n.input if not i.startswith("^")}
    if unsized & read:  # their bytes count 0: a table or iterator weighs nothing here, a variable would
        info_meta["unsized_resources"] = sorted(unsized & read)
    if estimated:
        info_meta["unknown_dims"] = {
            "estimate": estimate, "by": "allow_unknown_shapes" if allow_unknown_shapes else "unknown_dim",
            "ops": list(dict.fromkeys(estimated))}
    if inlined:
        info_meta["inlined_function_calls"] = inlined
    calls = sum(1 for n in nodes if n.op in CALL_TYPES | CONTROL_FLOW_TYPES)
    if calls:
        info_meta["function_call_ops"] = calls  # bodies not expanded (loops, conditionals); FLOPs fall back
    info_meta.update(meta or {})
    return OpGraph(name, ops, info_meta)


# -- helpers ----------------------------------------------------------------------
def _parse_inputs(inputs: Iterable[str]) -> tuple[list[tuple[str, int]], list[str]]:
    """NodeDef inputs -> ([(producer, output index)], [control producers])."""
    data, control = [], []
    for s in inputs:
        if s.startswith("^"):
            control.append(s[1:])
        else:
            src, _, k = s.partition(":")
            data.append((src, int(k) if k else 0))
    return data, control


def _n(shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _dtype_size(dtype) -> int:
    """Bytes per element; resource handles, variants and strings count 0."""
    base = dtype.base_dtype
    if base.name in ("resource", "variant", "string"):
        return 0
    return base.size


def _variable_bytes(node, var_shapes, out_shapes, tf) -> float:
    """Weight bytes a variable op owns: its full shape times its dtype's size."""
    if node.name in var_shapes:
        shape, dt = var_shapes[node.name]
        return float(_n(shape) * _dtype_size(dt))
    if node.op == "VarHandleOp":
        shape = shape_list(node.attr["shape"].shape)
        dt = tf.dtypes.as_dtype(node.attr["dtype"].type)
        return float(_n(shape) * _dtype_size(dt)) if shape is not None else 0.0
    # VariableV2 / Variable: the output is the variable itself
    dt = tf.dtypes.as_dtype(node.attr["dtype"].type)
    return float(_n(out_shapes[0]) * _dtype_size(dt)) if out_shapes else 0.0


def _small_const_value(node, out_shapes: list[list[int]]) -> Any:
    """The value of an integer ``Const`` node of at most `_SMALL_CONST` elements (a pooling window),
    as nested lists; None for any other node. FLOP rules read windows from these, never weights."""
    from tensorflow.core.framework import types_pb2

    if (node.op != "Const" or node.attr["dtype"].type not in (types_pb2.DT_INT32, types_pb2.DT_INT64)
            or not out_shapes or _n(out_shapes[0]) > _SMALL_CONST):
        return None
    from tensorflow.python.framework import tensor_util

    return tensor_util.MakeNdarray(node.attr["value"].tensor).tolist()


def _rule_attrs(node) -> dict[str, Any]:
    """The few attributes FLOP rules read, as plain Python values."""
    out: dict[str, Any] = {}
    for key in _RULE_ATTRS:
        if key not in node.attr:
            continue
        v = node.attr[key]
        kind = v.WhichOneof("value")
        if kind == "b":
            out[key] = v.b
        elif kind == "s":
            out[key] = v.s.decode("utf-8", "replace")
        elif kind == "list":
            out[key] = list(v.list.i)
    return out
