"""Shape inference for a GraphDef: every output's static shape, or an error naming the option that fixes it.

TensorFlow infers shapes when a GraphDef is imported into a `tf.Graph`, but
only from what the graph fixes: placeholders need their batch (or full
shape), and a `tf.function`'s captured variables are ``Placeholder`` nodes of
dtype ``resource`` whose shape a GraphDef does not carry. `inference_copy`
fills both in a copy used for inference only (a variable becomes a
``VarHandleOp`` of its shape), `import_for_inference` runs TensorFlow's
inference, and `static_shape` reads each output back, falling back on the
``_output_shapes`` TensorFlow writes with ``as_graph_def(add_shapes=True)``,
then on an explicit estimate. The rules for what may be estimated are
`placer.importers.graphdef`'s (its module docstring).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from placer.errors import InputShapeError, ModelImportError
from placer.importers.fetches import node_of

PLACEHOLDER_OPS = ("Placeholder", "PlaceholderV2")
"""The ops a model's inputs (and, in a function's graph, its captured variables' handles) come in as."""


def with_variable_shapes(graph_def, variable_shapes: Mapping[str, tuple[Iterable[int], Any]] | None = None):
    """A copy of `graph_def` whose variable placeholders are ``VarHandleOp``s of known shape.

    For tools that run their own shape inference on a `tf.function`'s GraphDef
    (grappler's cost estimator, say): without it, every read of a captured
    variable has an unknown shape, and so has every matmul or convolution using
    it. Shapes are `variable_shapes` or read from ``_output_shapes``.
    """
    var_shapes = resolve_variable_shapes(list(graph_def.node), variable_shapes)
    shaped, _ = inference_copy(graph_def, None, {}, var_shapes, True, None, [])
    return shaped


def shape_list(proto) -> list[int] | None:
    """A TensorShapeProto as a list, or None when the rank or any dim is unknown."""
    if proto.unknown_rank:
        return None
    dims = [int(d.size) for d in proto.dim]
    return None if any(d < 0 for d in dims) else dims


def shape_proto(shape, tensor_shape_pb2):
    proto = tensor_shape_pb2.TensorShapeProto()
    for d in shape:
        proto.dim.add().size = int(d)
    return proto


def resolve_variable_shapes(nodes, given) -> dict[str, tuple[list[int], Any]]:
    """Shapes and dtypes of the resource placeholders that stand for variables."""
    from tensorflow.python.framework import dtypes

    out: dict[str, tuple[list[int], Any]] = {}
    for k, (shape, dt) in (given or {}).items():
        out[k] = ([int(d) for d in shape], dtypes.as_dtype(dt))
    resource_placeholders = {
        n.name for n in nodes
        if n.op == "Placeholder" and n.attr["dtype"].type == dtypes.resource.as_datatype_enum
    }
    by_name = {n.name: n for n in nodes}

    def source(name: str) -> str:
        """Follow a handle back through Identity ops (inlined function inputs) to its producer."""
        for _ in range(64):
            node = by_name.get(name)
            if node is None or node.op != "Identity" or not node.input:
                break
            name = node.input[0].partition(":")[0]
        return name

    for n in nodes:
        if n.op != "ReadVariableOp" or "_output_shapes" not in n.attr:
            continue
        src = source(n.input[0].partition(":")[0]) if n.input else ""
        if src in resource_placeholders and src not in out:
            shape = shape_list(n.attr["_output_shapes"].list.shape[0])
            if shape is not None:
                out[src] = (shape, dtypes.as_dtype(n.attr["dtype"].type))
    return out


def inference_copy(graph_def, batch_size, input_shapes, var_shapes, allow_unknown, unknown_dim, estimated):
    """A copy of the GraphDef ready for shape inference, and a summary of its inputs; placeholders whose
    dimensions after the first are set to `unknown_dim` are added to `estimated`."""
    from tensorflow.core.framework import graph_pb2, tensor_shape_pb2
    from tensorflow.python.framework import dtypes

    for node in graph_def.node:  # a shape for anything but an input would be dropped silently
        if node.name in input_shapes and (
                node.op not in PLACEHOLDER_OPS or node.name in var_shapes
                or node.attr["dtype"].type == dtypes.resource.as_datatype_enum):
            what = f"a {node.op} node" if node.op not in PLACEHOLDER_OPS else "a variable's handle"
            raise ModelImportError(f"input shape given for {node.name!r}, {what}: only the model's input "
                                   "placeholders take one")
    gd = graph_pb2.GraphDef()
    gd.CopyFrom(graph_def)
    inputs_meta = []
    for node in gd.node:
        if "_output_shapes" in node.attr:
            del node.attr["_output_shapes"]
        if node.op not in PLACEHOLDER_OPS:
            continue
        dt = dtypes.as_dtype(node.attr["dtype"].type)
        if node.name in var_shapes:
            shape, vdt = var_shapes[node.name]
            node.op = "VarHandleOp"
            node.ClearField("attr")
            node.attr["dtype"].type = vdt.as_datatype_enum
            node.attr["shape"].shape.CopyFrom(shape_proto(shape, tensor_shape_pb2))
            node.attr["shared_name"].s = node.name.encode()
            node.attr["container"].s = b""
            continue
        if dt == dtypes.resource:
            continue  # a resource that is not a variable we know (a table, an iterator)
        proto = node.attr["shape"].shape
        if node.name in input_shapes:
            shape = input_shapes[node.name]
            declared = None if proto.unknown_rank else [int(d.size) for d in proto.dim]
            if declared is not None and (len(shape) != len(declared)
                                         or any(0 <= d != g for d, g in zip(declared, shape))):
                shown = "[" + ", ".join("?" if d < 0 else str(d) for d in declared) + "]"
                raise ModelImportError(f"input shape {shape} given for placeholder {node.name!r} does not fit its "
                                       f"declared shape {shown}")
        elif proto.unknown_rank:
            if not allow_unknown:
                problem = f"placeholder {node.name!r} has unknown rank"
                raise InputShapeError(f"{problem}; give its shape (--input-shape {node.name}=D1,D2,...)", problem)
            shape = None
        else:
            shape = [int(d.size) for d in proto.dim]
            if shape and shape[0] < 0 and batch_size:
                shape[0] = int(batch_size)
            if unknown_dim is not None and any(d < 0 for d in shape[1:]):
                shape = shape[:1] + [unknown_dim if d < 0 else d for d in shape[1:]]
                estimated.append(node.name)
            if any(d < 0 for d in shape):
                if not allow_unknown:
                    shown = "[" + ", ".join("?" if d < 0 else str(d) for d in shape) + "]"
                    given = f"--input-shape {node.name}=D1,D2,..."
                    hint = (f"give its shape ({given}) or estimate its unknown dimensions (--unknown-dim N)"
                            if batch_size or shape[0] >= 0 else f"give the batch size (--batch) or its shape ({given})")
                    problem = f"placeholder {node.name!r} has unknown shape {shown}"
                    raise InputShapeError(f"{problem}; {hint}", problem)
                estimated.append(node.name)
                shape = [1 if d < 0 else d for d in shape]
        if shape is not None:
            node.attr["shape"].shape.CopyFrom(shape_proto(shape, tensor_shape_pb2))
        inputs_meta.append({"name": node.name, "shape": shape, "dtype": dt.name})
    return gd, inputs_meta


def import_for_inference(graph_def, tf):
    """Import into a fresh tf.Graph (runs TF's shape inference); errors in one line."""
    graph = tf.Graph()
    try:
        with graph.as_default():
            tf.graph_util.import_graph_def(graph_def, name="")
    except (ValueError, TypeError, KeyError, tf.errors.OpError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if "cycle" in first:  # TF counts the nodes it could not order but names none of them
            cycle = _a_cycle(graph_def)
            if cycle:
                shown = " -> ".join(repr(n) for n in cycle[:8]) + (" -> ..." if len(cycle) > 8 else "")
                raise ModelImportError(f"node {cycle[0]!r}: is on a cycle ({shown} -> {cycle[0]!r})") from None
        raise ModelImportError(f"TensorFlow cannot import the GraphDef: {first}") from None
    return graph


def _a_cycle(graph_def) -> list[str]:
    """Nodes of one cycle of `graph_def` in data-flow order ([] if none), not counting a while loop's
    back edges (NextIteration into Merge), which TensorFlow allows."""
    import networkx as nx

    next_iterations = {n.name for n in graph_def.node if n.op in ("NextIteration", "RefNextIteration")}
    g = nx.DiGraph()
    for node in graph_def.node:
        for name in node.input:
            src = name.lstrip("^").split(":")[0]
            if not (node.op in ("Merge", "RefMerge") and src in next_iterations):
                g.add_edge(src, node.name)
    try:
        return [u for u, _ in nx.find_cycle(g)]
    except nx.NetworkXNoCycle:
        return []


def static_shape(tensor, node, k: int, allow_unknown: bool, unknown_ops: list[str], unknown_dim: int | None,
                  estimated: list[str], unsized: set[str]) -> list[int]:
    """The tensor's inferred shape, else the node's ``_output_shapes``, else an estimate or an error.

    A float tensor's unknown dimensions become `unknown_dim` (1 with `allow_unknown`) and the op is
    added to `estimated`; without either it is an error naming the op and the option that helps (the
    inputs' shapes are all known by now, so the dimension depends on the data). A variable read of
    unknown shape is an error even with `unknown_dim`. Integer and boolean tensors whose shape depends
    on values (the reduction indices of ``BroadcastGradientArgs``, ``Where``...) are index metadata, not
    data: their unknown dimensions become 1. Every such op is listed in `unknown_ops`. An op reading a
    resource of unknown shape (in `unsized`: a captured variable the GraphDef holds no shape for) is an
    error too: no estimate sizes a variable.
    """
    shape = tensor.shape
    if shape.is_fully_defined():
        return [int(d) for d in shape.as_list()]
    if "_output_shapes" in node.attr and k < len(node.attr["_output_shapes"].list.shape):
        recorded = shape_list(node.attr["_output_shapes"].list.shape[k])
        if recorded is not None:
            return recorded
    fill = 1
    if tensor.dtype.is_floating or tensor.dtype.is_complex:
        shown = "unknown rank" if shape.rank is None else str([d if d is not None else "?" for d in shape.as_list()])
        problem = f"op {node.name!r} ({node.op}): output {k} has shape {shown} after shape inference"
        if node.op == "ReadVariableOp" and not allow_unknown:
            # a captured variable: its shape is only in the readers' _output_shapes, and no estimate sizes it
            raise ModelImportError(f"{problem}; the variable it reads has no shape in the GraphDef: write the "
                                   "GraphDef with as_graph_def(add_shapes=True)")
        read = [node_of(i) for i in node.input if not i.startswith("^") and node_of(i) in unsized]
        if read and not allow_unknown:
            raise ModelImportError(f"{problem}; the variable it reads ({read[0]!r}) has no shape in the GraphDef "
                                   "(only a ReadVariableOp written with as_graph_def(add_shapes=True) records "
                                   "one): import the SavedModel or .keras file instead (placer import PATH)")
        if shape.rank is None and not allow_unknown:
            raise ModelImportError(f"{problem}; give the inputs' shapes (--batch, --input-shape)")
        if not allow_unknown and unknown_dim is None:
            raise ModelImportError(f"{problem}, though every input's shape is known: it depends on the data; "
                                   "estimate it with --unknown-dim N (recorded in the graph's meta)")
        fill = 1 if allow_unknown else unknown_dim
        estimated.append(node.name)
    if node.name not in unknown_ops:
        unknown_ops.append(node.name)
    return [fill if d is None else int(d) for d in (shape.as_list() if shape.rank is not None else [])]
