"""Export: a placement made ready to use in TensorFlow.

Two ways, one step from a placement file to a placed run:

- `placed_graphdef` / `write_placed_graphdef`: the GraphDef with every
  ``NodeDef.device`` set (``placer export model.pb --placement p.json -o placed.pb``);
- `place_function` / `place_keras_step`: the user's own `tf.function` (or a
  Keras model's training step) rebuilt with every op pinned, running on the
  user's own variables. The function is traced, its graph imported again with
  the devices set inside `tf.compat.v1.wrap_function`, its captured variables
  mapped back to the user's variables, and its stateful ops (the optimizer's
  updates) made to run before the outputs are returned.

Op names must match: the placement must come from a graph imported from the
same function (`placer.importers.from_tf_function` / `from_keras`) traced on
the same signature.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

from placer.errors import PlacementError, PlacerError
from placer.graph import OpGraph
from placer.measure.pinning import node_devices
from placer.placement import Placement


def placed_graphdef(graph: OpGraph, graph_def, placement: Placement):
    """A copy of `graph_def` with every ``NodeDef.device`` set from `placement`.

    Raises
    ------
    PlacementError
        If the placement misses an op of `graph`, names an op it lacks, or a non-device.
    """
    from tensorflow.core.framework import graph_pb2

    devices = node_devices(graph, graph_def, placement)
    out = graph_pb2.GraphDef()
    out.CopyFrom(graph_def)
    for node in out.node:
        node.device = devices[node.name]
    return out


def write_placed_graphdef(graph: OpGraph, graph_def, placement: Placement, path: str | os.PathLike):
    """Write the placed GraphDef (text format if the name ends in ``.pbtxt``); returns it."""
    from google.protobuf import text_format

    from placer.fileio import write_atomic

    placed = placed_graphdef(graph, graph_def, placement)
    path = Path(path)
    data = text_format.MessageToString(placed).encode() if path.suffix == ".pbtxt" else placed.SerializeToString()
    write_atomic(path, data)
    return placed


def _devices_by_name(concrete_function, placement: Placement, graph: OpGraph | None) -> dict[str, str]:
    """Device per node of the traced function, checked against the placement."""
    from placer.importers.keras_models import from_tf_function

    graph_def = concrete_function.graph.as_graph_def(add_shapes=True)
    if graph is None:
        graph = from_tf_function(concrete_function, [], placement.graph or "function")
    names = {n.name for n in graph_def.node}
    stray = [op for op in placement.devices if op not in names]
    if stray:
        raise PlacementError(
            f"placement names op {stray[0]!r} which the traced function does not have ({len(stray)} of "
            f"{len(placement.devices)} ops): was the placement made for this function and input signature?")
    return node_devices(graph, graph_def, placement)


def _check_eager_devices(wanted: set[str]) -> None:
    """Eager TF moves ops off devices it lacks without a word: refuse such a placement instead."""
    import tensorflow as tf

    from placer.measure.pinning import canonical_device

    have = {canonical_device(d.name) for d in tf.config.list_logical_devices()}
    lacking = sorted(wanted - have)
    if lacking:
        raise PlacementError(
            f"placement uses {lacking[0]}, which TensorFlow does not have here (devices: {', '.join(sorted(have))}); "
            "for N logical CPU devices call tf.config.set_logical_device_configuration(cpu, "
            "[tf.config.LogicalDeviceConfiguration()] * N) before TensorFlow starts")


def place_function(fn, input_signature: Sequence, placement: Placement, *, graph: OpGraph | None = None):
    """The user's `tf.function` with every op pinned to its placed device.

    Parameters
    ----------
    fn : a `tf.function` or a concrete function (a Python function is wrapped in `tf.function`).
    input_signature : the `tf.TensorSpec`s the placement's graph was traced with.
    placement : a device per op, from a graph imported from this function.
    graph : that graph, if at hand (saves re-importing it to find folded nodes).

    Returns
    -------
    callable
        Takes the function's inputs (flattened, in order) and returns its flat
        outputs; runs on the user's variables (captured, not copied).

    Raises
    ------
    PlacementError
        If the placement does not match the traced function's ops.
    PlacerError
        If the function's captures cannot be mapped back.

    Examples
    --------
    >>> step = keras_step(model, 32)                                        # doctest: +SKIP
    >>> placed = place_function(step.function, step.signature, placement)   # doctest: +SKIP
    >>> loss = placed(x, y)                                                 # doctest: +SKIP
    """
    import tensorflow as tf

    if isinstance(fn, tf.types.experimental.ConcreteFunction):
        cf = fn
    else:
        if not isinstance(fn, tf.types.experimental.PolymorphicFunction):
            fn = tf.function(fn)
        cf = fn.get_concrete_function(*input_signature)
    devices = _devices_by_name(cf, placement, graph)
    _check_eager_devices(set(devices.values()))
    graph_def = cf.graph.as_graph_def()
    for node in graph_def.node:
        node.device = devices[node.name]

    captured = {internal.op.name: external
                for external, internal in zip(cf.graph.external_captures, cf.graph.internal_captures)}
    arg_inputs = [t for t in cf.graph.inputs if t.op.name not in captured]
    outputs = [t.name for t in cf.graph.outputs]
    control = [op.name for op in cf.graph.control_outputs]
    specs = [tf.TensorSpec(t.shape, t.dtype) for t in arg_inputs]

    def body(*args):
        input_map = {t.name: a for t, a in zip(arg_inputs, args)}
        func_graph = tf.compat.v1.get_default_graph()
        for name, external in captured.items():
            input_map[f"{name}:0"] = func_graph.capture(external)  # the user's variable, by reference
        elements = tf.graph_util.import_graph_def(graph_def, input_map=input_map,
                                                  return_elements=outputs + control, name="placed")
        outs, ops = elements[:len(outputs)], elements[len(outputs):]
        with tf.control_dependencies(ops):
            return [tf.identity(t) for t in outs]

    try:
        return tf.compat.v1.wrap_function(body, specs)
    except (ValueError, TypeError, tf.errors.OpError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise PlacerError(f"cannot rebuild the function with the placement: {first}") from None


def place_keras_step(model, batch_size: int, placement: Placement, **step_options: Any):
    """A Keras model's training step with every op pinned: ``placed(x, y) -> [loss]``.

    `step_options` go to `placer.importers.keras_step` (optimizer, loss,
    target_specs) and must be those the placement's graph was imported with.
    Keras names an optimizer's ops after its instance (``sgd``, ``sgd_1``...),
    so pass the optimizer instance itself, or build model and optimizer in a
    fresh process in the same order as when the graph was imported.
    The step updates the model's own weights and optimizer state.
    """
    from placer.importers.keras_models import keras_step

    step = keras_step(model, batch_size, **step_options)
    return place_function(step.concrete_function(), step.signature, placement)
