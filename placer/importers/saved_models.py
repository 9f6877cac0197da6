"""Models as users save them: a SavedModel folder and a ``.keras`` file, into an `OpGraph`.

A SavedModel is imported as one of its signatures runs it (an inference
graph): the signature's concrete function, with its captured variables'
shapes and sizes from the SavedModel's own variables, goes through
`placer.importers.keras_models.from_tf_function` (unknown batch dimensions
filled by ``batch_size``). A ``.keras`` file is a Keras model: one training
step is traced as `from_keras` traces it, with the loss and optimizer it was
compiled with (a fresh optimizer of the same configuration), or those given.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any, Iterable, NamedTuple

from placer.errors import ModelImportError
from placer.graph import OpGraph
from placer.importers.function_calls import runnable_graphdef
from placer.importers.graphdef import DEFAULT_FOLD

SAVED_MODEL_FILES = ("saved_model.pb", "saved_model.pbtxt")
"""A folder holding one of these is a SavedModel."""
DEFAULT_SIGNATURE = "serving_default"
KERAS_MEMBERS = ("config.json", "model.weights.h5")
"""Members every ``.keras`` archive holds (Keras 3's format, a zip)."""


def is_saved_model(path: str | Path) -> bool:
    """Whether `path` is a SavedModel folder."""
    p = Path(path)
    return p.is_dir() and any((p / f).is_file() for f in SAVED_MODEL_FILES)


def is_keras_file(path: str | Path) -> bool:
    """Whether `path` is a Keras 3 ``.keras`` archive (a zip with its config and weights), by content."""
    try:
        with zipfile.ZipFile(path) as z:
            return set(KERAS_MEMBERS) <= set(z.namelist())
    except (OSError, zipfile.BadZipFile):
        return False


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def from_saved_model(path: str | Path, name: str | None = None, *, signature: str | None = None,
                     batch_size: int | None = None, input_shapes: dict[str, list[int]] | None = None,
                     unknown_dim: int | None = None, fold: Iterable[str] = DEFAULT_FOLD, prune: bool = True,
                     with_graph_def: bool = False) -> OpGraph | tuple[OpGraph, Any]:
    """One signature of a SavedModel as an inference graph.

    Parameters
    ----------
    path : the SavedModel folder.
    name : the graph's name; default the folder's name.
    signature : the signature to import (``--signature``); default ``serving_default``, or the only one.
    batch_size : fills the inputs' unknown first dimension (``--batch``).
    input_shapes : full shapes of the signature's input placeholders by node name (``--input-shape``).
    unknown_dim : estimate for other unknown dimensions (``--unknown-dim``; see `from_graphdef`).
    fold, prune : as `placer.importers.keras_models.from_tf_function`.
    with_graph_def : also return the GraphDef the graph's ops are nodes of (the signature's, calls inlined), as
        ``(graph, graph_def)``: what running or pinning the graph needs.

    Raises
    ------
    ModelImportError
        If `path` is no SavedModel TensorFlow can load, it has no such signature (the message lists
        them), or an input's shape stays unknown.
    """
    from placer.importers.keras_models import from_tf_function

    path = Path(path)
    loaded = load_signature(path, signature)  # held while tracing: the signature's variables live in it
    cf = loaded.function
    meta = {
        "source": f"SavedModel {path.name}", "signature": loaded.name, "signatures": loaded.names,
        "training": False, "batch_size": batch_size,
    }
    graph = from_tf_function(cf, (), name or path.resolve().name, fold=fold, meta=meta, prune=prune,
                             batch_size=batch_size, input_shapes=input_shapes, unknown_dim=unknown_dim)
    if with_graph_def:
        return graph, runnable_graphdef(cf.graph.as_graph_def(add_shapes=True))
    return graph


class Signature(NamedTuple):
    """One signature of a loaded SavedModel; `model` owns the variables `function` captures, so it must
    live as long as the function is used."""

    model: Any
    function: Any
    name: str
    names: list[str]


def load_signature(path: str | Path, signature: str | None = None) -> Signature:
    """One signature of a SavedModel, loaded.

    `signature` defaults to ``serving_default``, or the only one.

    Raises
    ------
    ModelImportError
        If `path` is no SavedModel TensorFlow can load, or it has no such signature (the message lists them).
    """
    import tensorflow as tf

    path = Path(path)
    if not is_saved_model(path):
        raise ModelImportError(f"{str(path)!r} is not a SavedModel folder (no {' or '.join(SAVED_MODEL_FILES)})")
    try:
        loaded = tf.saved_model.load(str(path))
    except Exception as e:  # TF raises many types (OSError, ValueError, NotFoundError...) for broken folders
        raise ModelImportError(f"{str(path)!r}: TensorFlow cannot load this SavedModel: {_first_line(e)}") from None
    signatures = dict(getattr(loaded, "signatures", {}) or {})
    if not signatures:
        raise ModelImportError(f"{str(path)!r}: the SavedModel has no signatures (save it with "
                               "tf.saved_model.save(..., signatures=...) or Keras' model.export)")
    if signature is None:
        signature = DEFAULT_SIGNATURE if DEFAULT_SIGNATURE in signatures or len(signatures) > 1 else next(
            iter(signatures))
    if signature not in signatures:
        raise ModelImportError(f"{str(path)!r} has no signature {signature!r}; give one of "
                               f"{', '.join(sorted(signatures))} (--signature NAME)")
    return Signature(loaded, signatures[signature], signature, sorted(signatures))


def load_keras_file(path: str | Path):
    """The Keras model a ``.keras`` file holds, loaded in Keras' safe mode (no code from the file runs).

    Raises
    ------
    ModelImportError
        If it is no ``.keras`` archive, or Keras cannot load it (custom layers, a Lambda layer...).
    """
    import keras

    path = Path(path)
    if not is_keras_file(path):
        raise ModelImportError(f"{str(path)!r} is not a .keras file (a zip holding {' and '.join(KERAS_MEMBERS)})")
    if path.suffix != ".keras":  # Keras refuses any other name
        raise ModelImportError(f"{str(path)!r}: a Keras model file must be named *.keras")
    try:
        return keras.models.load_model(str(path), safe_mode=True)
    except Exception as e:  # Keras raises ValueError, TypeError, OSError... for files it cannot read
        raise ModelImportError(f"{str(path)!r}: Keras cannot load this model: {_first_line(e)}") from None


def from_keras_file(path: str | Path, batch_size: int, name: str | None = None, *, loss: str | None = None,
                    optimizer: str | None = None, training: bool = True, fold: Iterable[str] = DEFAULT_FOLD,
                    prune: bool = True, with_graph_def: bool = False) -> OpGraph | tuple[OpGraph, Any]:
    """One training step (or forward pass) of the model a ``.keras`` file holds.

    Parameters
    ----------
    path : the ``.keras`` file.
    batch_size : the batch dimension of every input (``--batch``).
    name : the graph's name; default the file's stem.
    loss, optimizer : Keras names (``--loss``, ``--optimizer``); default those the model was compiled
        with (its optimizer's configuration, fresh slots). A model saved uncompiled needs both to train.
    training : False imports a forward pass only.
    fold, prune : as `placer.importers.keras_models.from_keras`.
    with_graph_def : also return the GraphDef the graph's ops are nodes of (the traced step's, calls inlined),
        as ``(graph, graph_def)``.

    Raises
    ------
    ModelImportError
        If the file cannot be loaded, the model's loss or optimizer is unknown and not given, its loss is
        one per output (give one with ``--loss``), or its input shapes are not fixed.
    """
    from placer.importers.keras_models import from_tf_function

    path = Path(path)
    step = keras_file_step(path, batch_size, loss=loss, optimizer=optimizer, training=training)
    graph = from_tf_function(step.concrete_function(), step.signature, name or path.stem, fold=fold,
                             variable_paths=step.variable_paths, meta=step.meta, prune=prune)
    if with_graph_def:
        return graph, runnable_graphdef(step.graph_def())
    return graph


def keras_file_step(path: str | Path, batch_size: int, *, loss: str | None = None, optimizer: str | None = None,
                    training: bool = True):
    """The `placer.importers.keras_models.KerasStep` `from_keras_file` traces (see it for the parameters).

    Its meta says where the loss and optimizer came from (``loss_from``, ``optimizer_from``: ``"compiled"``
    or ``"given"``), so the same step can be traced again from the file (``placer profile --keras``).
    """
    import keras

    from placer.importers.keras_models import keras_step

    path = Path(path)
    model = load_keras_file(path)
    compiled = bool(getattr(model, "compiled", False))
    loss_from = opt_from = "given"
    if training:
        if loss is None:
            loss = getattr(model, "loss", None) if compiled else None
            if loss is None:
                raise ModelImportError(f"{str(path)!r}: the model was saved without a loss (not compiled); "
                                       "give one (--loss, e.g. mean_squared_error)")
            if isinstance(loss, (list, tuple, dict)):
                raise ModelImportError(f"{str(path)!r}: the model was compiled with one loss per output; "
                                       "give one loss for all (--loss)")
            loss_from = "compiled"
        if optimizer is None:
            saved = getattr(model, "optimizer", None) if compiled else None
            if saved is None:
                raise ModelImportError(f"{str(path)!r}: the model was saved without an optimizer (not "
                                       "compiled); give one (--optimizer, e.g. adam)")
            optimizer = keras.optimizers.deserialize(keras.optimizers.serialize(saved))
            opt_from = "compiled"
    loss_key = loss if isinstance(loss, str) else type(loss).__name__
    targets = _sparse_targets(model, batch_size) if "sparse" in loss_key.lower() else None
    step = keras_step(model, batch_size, optimizer, training, loss=loss, target_specs=targets)
    step.meta["source"] = f"Keras file {path.name}"
    if training:
        step.meta.update(optimizer_from=opt_from, loss_from=loss_from)
    return step


def _sparse_targets(model, batch_size: int) -> list:
    """Targets of a sparse loss: class indices, the outputs' shape without the class axis, int32."""
    import tensorflow as tf

    specs = []
    for out in model.outputs:
        dims = [batch_size if d is None else d for d in list(out.shape)[:-1]]
        specs.append(tf.TensorSpec(dims, tf.int32))
    return specs
