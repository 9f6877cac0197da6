"""Nested `tf.function` calls in a GraphDef, inlined as TensorFlow's runtime inlines them.

A Keras or `tf.function` step calls library functions (``StatefulPartitionedCall``);
the ops inside are the step's FLOPs and what a placement places, so calls are
inlined before shapes are inferred. Functional loops and conditionals stay
single ops (`CONTROL_FLOW_TYPES`).
"""

from __future__ import annotations

from placer.errors import ModelImportError
from placer.importers.fetches import node_of

CALL_TYPES = {"PartitionedCall", "StatefulPartitionedCall"}
CONTROL_FLOW_TYPES = {"While", "StatelessWhile", "If", "StatelessIf", "Case", "StatelessCase"}
"""Functional loops and conditionals: kept as single ops (lowering them would create cycles)."""
_XLA_MUST_COMPILE = "_XlaMustCompile"


def check_op_types(graph_def, tf) -> None:
    """A ModelImportError naming the first node whose op type TensorFlow does not know.

    TF's own import error says neither which node it is nor anything short
    (its one line runs to 450 characters about tf.contrib).
    """
    from tensorflow.python.framework import op_def_registry

    functions = {f.signature.name for f in graph_def.library.function}
    for node in graph_def.node:
        if node.op not in functions and op_def_registry.get(node.op) is None:
            raise ModelImportError(f"node {node.name!r}: op type {node.op!r} is unknown to TensorFlow "
                                   f"{tf.__version__} (a custom op, or one of another TensorFlow version)")


def runnable_graphdef(graph_def):
    """`graph_def` with its calls inlined: the GraphDef whose nodes an imported `OpGraph`'s ops are, which
    running or pinning the graph needs (a GraphDef without calls is returned as it is)."""
    return inline_function_calls(graph_def)[0]


def inline_function_calls(graph_def):
    """Inline calls of library functions (nested `tf.function`s), as TF's runtime does.

    Uses grappler's function optimizer only, fetching every sink so nothing is
    pruned. Nodes outside functions keep their names; a function's body gets
    the call node's name as prefix (``StatefulPartitionedCall/MatMul``), as in
    TensorFlow's own runtime graph. Functional loops and conditionals
    (``While``, ``If``) are left as they are: lowering them would create cycles.
    Returns the (possibly new) GraphDef and the number of calls inlined.
    """
    functions = {f.signature.name for f in graph_def.library.function}
    calls = [n for n in graph_def.node if n.op in CALL_TYPES or n.op in functions]
    if not calls:
        return graph_def, 0
    from tensorflow.core.protobuf import config_pb2, meta_graph_pb2, rewriter_config_pb2
    from tensorflow.python.grappler import tf_optimizer

    graph_def = _without_xla_marks(graph_def)
    consumed = {node_of(i) for n in graph_def.node for i in n.input}
    metagraph = meta_graph_pb2.MetaGraphDef(graph_def=graph_def)
    metagraph.collection_def["train_op"].node_list.value.extend(
        n.name for n in graph_def.node if n.name not in consumed)
    config = config_pb2.ConfigProto()
    rewrite = config.graph_options.rewrite_options
    rewrite.optimizers.append("function")
    rewrite.min_graph_nodes = -1
    rewrite.meta_optimizer_iterations = rewriter_config_pb2.RewriterConfig.ONE
    try:
        inlined = tf_optimizer.OptimizeGraph(config, metagraph)
    except Exception as e:  # grappler raises plain errors on malformed graphs
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelImportError(f"cannot inline the GraphDef's function calls: {first}") from None
    left = sum(1 for n in inlined.node if n.op in CALL_TYPES)
    return inlined, len(calls) - left


def _without_xla_marks(graph_def):
    """`graph_def`, or a copy whose calls and functions marked for XLA compilation are unmarked.

    ``tf.function(jit_compile=True)`` marks the function ``_XlaMustCompile`` and
    ``_noinline``, and each call of it ``_XlaMustCompile``; grappler inlines no
    such call (it leaves them to XLA), so their FLOPs would fall back to one per
    output element. Other ``_noinline`` functions keep their mark.
    """
    def marked(attrs) -> bool:
        return _XLA_MUST_COMPILE in attrs and attrs[_XLA_MUST_COMPILE].b

    library = graph_def.library.function
    if not (any(marked(n.attr) for n in graph_def.node) or any(marked(f.attr) for f in library)
            or any(marked(n.attr) for f in library for n in f.node_def)):
        return graph_def
    unmarked = type(graph_def)()
    unmarked.CopyFrom(graph_def)
    for f in unmarked.library.function:
        if marked(f.attr):
            del f.attr[_XLA_MUST_COMPILE]
            if "_noinline" in f.attr:
                del f.attr["_noinline"]
        for n in f.node_def:
            if marked(n.attr):
                del n.attr[_XLA_MUST_COMPILE]
    for n in unmarked.node:
        if marked(n.attr):
            del n.attr[_XLA_MUST_COMPILE]
    return unmarked
