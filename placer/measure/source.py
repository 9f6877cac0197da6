"""Where a graph's TensorFlow original comes from, so it can be run for real.

An `OpGraph` is a summary: it cannot be executed. To measure a placement we
need the `GraphDef` it was imported from. We keep that GraphDef in one of two
places, both of which keep op names identical to TF node names:

- embedded in the graph's meta (``meta["tf_graphdef"]``: the serialized
  GraphDef, gzip-compressed and base64-encoded; `attach_graphdef` writes it),
  so one graph file is all a measurement needs;
- a GraphDef file the user names (``placer measure --graphdef model.pb``),
  the same file ``placer import model.pb`` read.

Or it is traced again from the SavedModel folder or ``.keras`` file the graph
was imported from (`saved_model_graphdef`, `keras_graphdef`: ``placer profile
--saved-model DIR`` / ``--keras FILE``), by the importers' own loaders, as the
step the import traced.

A graph from any other source (JSON written by hand, the MSR importer, a
synthetic benchmark) has no TF origin and cannot be measured.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import os
import zlib
from pathlib import Path
from typing import Any, Collection

from placer.errors import ModelImportError, PlacerError
from placer.graph import OpGraph

META_KEY = "tf_graphdef"


class NoTensorFlowOrigin(PlacerError):
    """The graph was not imported from TensorFlow, so it cannot be run."""


def require_embedded_graphdef(graph: OpGraph, what: str) -> None:
    """Refuse, before any work, a graph without its GraphDef embedded where `what` (a command's option that
    runs samples and takes no GraphDef path) needs it."""
    blob = graph.meta.get(META_KEY)
    if not isinstance(blob, dict) or "data" not in blob:
        raise NoTensorFlowOrigin(
            f"graph {graph.name!r} (source: {graph.meta.get('source', 'unknown source')}) carries no TensorFlow "
            f"GraphDef, which {what} needs to run each sample: give the graph file `placer profile` writes (it "
            "embeds the GraphDef), or embed it yourself (placer.measure.attach_graphdef)")


def attach_graphdef(graph: OpGraph, graph_def) -> OpGraph:
    """Embed `graph_def` in ``graph.meta`` (in place) and return the graph.

    Parameters
    ----------
    graph : a graph imported from `graph_def` (same node names).
    graph_def : a ``GraphDef`` proto.

    Raises
    ------
    ModelImportError
        If an op of the graph names no node of the GraphDef (they do not belong together).
    """
    names = {n.name for n in graph_def.node}
    missing = [op.name for op in graph if op.name not in names]
    if missing:
        raise ModelImportError(f"op {missing[0]!r} of graph {graph.name!r} is no node of the GraphDef "
                               f"({len(missing)} ops missing): they were not imported from each other")
    raw = graph_def.SerializeToString()
    graph.meta[META_KEY] = {
        "encoding": "gzip+base64",
        "sha256": hashlib.sha256(raw).hexdigest(),
        "data": base64.b64encode(gzip.compress(raw, mtime=0)).decode("ascii"),
    }
    return graph


def graphdef_of(graph: OpGraph, path: str | os.PathLike | None = None):
    """The GraphDef behind `graph`: read from `path` if given, else from the graph's meta.

    Raises
    ------
    NoTensorFlowOrigin
        If no path is given and the graph carries no GraphDef.
    ModelImportError
        If the file or the embedded data is not a GraphDef, or ops of the graph are missing from it.
    """
    if path is not None:
        graph_def = read_graphdef(path)
    else:
        blob = graph.meta.get(META_KEY)
        if not isinstance(blob, dict) or "data" not in blob:
            source = graph.meta.get("source", "unknown source")
            raise NoTensorFlowOrigin(
                f"graph {graph.name!r} (source: {source}) carries no TensorFlow GraphDef, which running or "
                "pinning it needs (graph files written by placer import and import-keras hold none): give the "
                "GraphDef it was imported from (--graphdef model.pb; import-keras writes it with "
                "--save-graphdef), or embed it (placer.measure.attach_graphdef)")
        from tensorflow.core.framework import graph_pb2  # after the check: TF takes seconds to load

        try:
            raw = gzip.decompress(base64.b64decode(blob["data"]))
        except (ValueError, OSError, EOFError, zlib.error) as e:
            raise ModelImportError(f"graph {graph.name!r}: embedded GraphDef is corrupt ({e})") from None
        graph_def = graph_pb2.GraphDef()
        try:
            graph_def.ParseFromString(raw)
        except Exception as e:  # protobuf's DecodeError and friends
            raise ModelImportError(f"graph {graph.name!r}: embedded GraphDef is corrupt ({e})") from None
    _check_belongs(graph, graph_def, "the GraphDef", "this GraphDef")
    return graph_def


def _check_belongs(graph: OpGraph, graph_def, what: str, source: str) -> None:
    """A ModelImportError unless every op of `graph` is a node of `graph_def` (`what`, from `source`)."""
    names = {n.name for n in graph_def.node}
    missing = [op.name for op in graph if op.name not in names]
    if missing:
        raise ModelImportError(
            f"op {missing[0]!r} of graph {graph.name!r} is no node of {what} ({len(missing)} of "
            f"{len(graph)} ops missing): the graph was not imported from {source}")


def saved_model_graphdef(graph: OpGraph, path: str | os.PathLike, signature: str | None = None):
    """The GraphDef behind `graph`, traced again from the SavedModel folder it was imported from.

    The step is the one ``placer import DIR`` imported: the signature's function (``meta["signature"]``;
    `signature`, ``--signature``, must agree with it), its calls inlined.

    Raises
    ------
    ModelImportError
        If the folder is no SavedModel with that signature, `signature` is not the one the graph was
        imported from, or ops of the graph are no nodes of the signature's step.
    """
    from placer.importers.function_calls import runnable_graphdef
    from placer.importers.saved_models import load_signature

    imported = graph.meta.get("signature")
    if signature is not None and imported is not None and signature != imported:
        raise ModelImportError(f"--signature {signature}: graph {graph.name!r} was imported from signature "
                               f"{imported!r}")
    loaded = load_signature(path, signature or imported)
    graph_def = runnable_graphdef(loaded.function.graph.as_graph_def(add_shapes=True))
    _check_belongs(graph, graph_def, f"signature {loaded.name!r} of {str(path)!r}", "it")
    return graph_def


def keras_graphdef(graph: OpGraph, path: str | os.PathLike, batch_size: int | None = None):
    """The GraphDef behind `graph`, traced again from the ``.keras`` file it was imported from.

    The step is the one ``placer import model.keras`` traced: a training step (a forward pass where
    ``meta["training"]`` is false) at the graph's batch size (``meta["batch_size"]``; `batch_size`,
    ``--batch``, must agree with it, and is needed only for a graph that records none), with the loss and
    optimizer the import used: the model's compiled ones, or the ones given then (``meta["loss_from"]``,
    ``meta["optimizer_from"]``).

    Raises
    ------
    ModelImportError
        If the file cannot be loaded or traced, the batch size is unknown or not the graph's, or ops of
        the graph are no nodes of the traced step.
    """
    from placer.importers.function_calls import runnable_graphdef
    from placer.importers.saved_models import keras_file_step

    m = graph.meta
    imported = m.get("batch_size")
    if batch_size is not None and imported is not None and batch_size != imported:
        raise ModelImportError(f"--batch {batch_size}: graph {graph.name!r} was imported with batch size "
                               f"{imported}; import it again with --batch {batch_size} to profile that step")
    batch_size = batch_size or imported
    if batch_size is None:
        raise ModelImportError(f"graph {graph.name!r} records no batch size: give the one it was imported "
                               "with (--batch)")
    training = m.get("training", True)
    step = keras_file_step(path, int(batch_size), training=training,
                           loss=m.get("loss") if training and m.get("loss_from") == "given" else None,
                           optimizer=m.get("optimizer") if training and m.get("optimizer_from") == "given" else None)
    graph_def = runnable_graphdef(step.graph_def())
    _check_belongs(graph, graph_def, f"the step traced from {str(path)!r}", "it (or with other options)")
    return graph_def


def read_graphdef(path: str | os.PathLike):
    """Parse a binary (``.pb``) or text (``.pbtxt``) GraphDef file, plain or gzip, detected by content."""
    from google.protobuf import text_format
    from tensorflow.core.framework import graph_pb2

    from placer.importers import read_model_bytes

    raw = read_model_bytes(path)
    graph_def = graph_pb2.GraphDef()
    try:
        graph_def.ParseFromString(raw)
        if graph_def.node:
            return graph_def
    except Exception:
        pass
    try:
        text_format.Parse(raw.decode("utf-8"), graph_def)
    except Exception:
        raise ModelImportError(f"GraphDef {str(path)!r}: not a binary or text GraphDef") from None
    if not graph_def.node:
        raise ModelImportError(f"GraphDef {str(path)!r}: has no nodes")
    return graph_def


def variable_specs(graph: OpGraph, graph_def) -> dict[str, tuple[list[int], Any]]:
    """``{resource placeholder: (shape, dtype)}`` for every captured variable of the graph.

    From ``meta["captures"]`` (written by `from_tf_function`) where present,
    else from the ``_output_shapes`` of the ``ReadVariableOp`` nodes that read it.
    """
    from placer.importers.shapes import resolve_variable_shapes

    given = {c["placeholder"]: (c["shape"], c["dtype"]) for c in graph.meta.get("captures", [])
             if c.get("kind") == "variable"}
    return resolve_variable_shapes(list(graph_def.node), given)


def load_runnable(path: str | os.PathLike, graphdef_path: str | os.PathLike | None = None, *,
                  need_input_shapes: bool = True, placed: Collection[str] | None = None):
    """``(OpGraph, GraphDef)`` from a graph file, or from a GraphDef file imported on the spot.

    Parameters
    ----------
    path : a JSON graph (its GraphDef embedded, or given as `graphdef_path`), or a
        ``.pb`` / ``.pbtxt`` GraphDef.
    graphdef_path : the GraphDef a JSON graph was imported from.
    need_input_shapes : a measurement feeds each placeholder an input of its shape, so a
        GraphDef given as `path` must fix them; an export only pins nodes, so one with
        an open batch dimension (as most saved models have) will do.
    placed : the ops a placement places. A GraphDef given as `path` says nothing of what its
        step fetches, so it imports with every node; when the placement places fewer (it was made
        for the step as `import-keras` imports it, without the nodes TensorFlow would not run),
        the GraphDef is imported as that step, if the left-out ops are exactly those.

    Raises
    ------
    NoTensorFlowOrigin
        If a JSON graph carries no GraphDef and none is given.
    ModelImportError
        If a file cannot be read or does not belong with the other, or (with
        `need_input_shapes`) a GraphDef's placeholder has no fixed shape.
    """
    from placer.importers import default_name, detect_format, import_file, read_model_bytes

    path = Path(path)
    fmt = detect_format(read_model_bytes(path), str(path))
    if fmt not in ("graphdef", "pbtxt"):
        graph = import_file(path, fmt)
        return graph, graphdef_of(graph, graphdef_path)
    from placer.importers.graphdef import from_graphdef

    graph_def = read_graphdef(path)
    if need_input_shapes:
        _check_fixed_inputs(graph_def, path)
    try:  # shapes inside the graph are not needed to run or pin it
        graph = from_graphdef(graph_def, default_name(path), allow_unknown_shapes=True)
    except PlacerError as e:
        raise type(e)(f"{str(path)!r}: {e}") from None
    if placed is not None and set(placed) < set(graph.index):
        try:
            step = from_graphdef(graph_def, graph.name, allow_unknown_shapes=True, fetches=list(placed))
        except PlacerError:
            step = None  # ops the GraphDef lacks: pinning will name them
        if step is not None and set(step.index) == set(placed):
            graph = step
    return graph, (graph_def if graphdef_path is None else graphdef_of(graph, graphdef_path))


def _check_fixed_inputs(graph_def, path: Path) -> None:
    """A ModelImportError for the first non-resource placeholder without a fixed shape."""
    from tensorflow.core.framework import types_pb2

    for node in graph_def.node:
        if node.op not in ("Placeholder", "PlaceholderV2") or node.attr["dtype"].type == types_pb2.DT_RESOURCE:
            continue
        shape = node.attr["shape"].shape
        if shape.unknown_rank or any(d.size < 0 for d in shape.dim):
            shown = "unknown rank" if shape.unknown_rank else \
                "[" + ", ".join("?" if d.size < 0 else str(d.size) for d in shape.dim) + "]"
            raise ModelImportError(
                f"{str(path)!r}: placeholder {node.name!r} has no fixed shape ({shown}), so no input can be made "
                f"for it: import it with `placer import {path} --batch B -o GRAPH` and measure GRAPH with "
                f"--graphdef {path}")
