"""Keras models and `tf.function`s -> `OpGraph`, as one training step.

Keras 3 models cannot be exported through TF1 graph mode, so a training step
is built the TF2 way: forward under a `tf.GradientTape`, the loss, the
gradients and ``optimizer.apply_gradients`` inside a `tf.function`, traced
with fixed-batch `tf.TensorSpec`s. The concrete function's
``graph.as_graph_def(add_shapes=True)`` then goes through `from_graphdef`, so
op names are exactly TensorFlow's node names and a GraphDef written from the
same function re-imports to the same OpGraph.

Variables are the concrete function's captured inputs: ``Placeholder`` nodes
of dtype ``resource``. ``meta["captures"]`` maps each such node to the
variable it stands for (Keras path, shape, dtype), which is what one needs
to run the graph again with real variables.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from placer.errors import ModelImportError
from placer.graph import OpGraph
from placer.importers.graphdef import DEFAULT_FOLD, from_graphdef


def from_tf_function(fn, input_signature: Sequence, name: str, *, fold: Iterable[str] = DEFAULT_FOLD,
                     variable_paths: dict[int, str] | None = None, meta: dict[str, Any] | None = None,
                     prune: bool = True, batch_size: int | None = None,
                     input_shapes: dict[str, list[int]] | None = None, unknown_dim: int | None = None) -> OpGraph:
    """Import a `tf.function` (or plain Python function) traced on `input_signature`.

    Parameters
    ----------
    fn : a `tf.function`, a concrete function, or a Python function (wrapped in `tf.function`).
    input_signature : the `tf.TensorSpec`s (or nests of them) to trace with; fix every dimension.
    name : the graph's name.
    fold : op types folded into their consumers (see `from_graphdef`).
    variable_paths : ``{id(variable handle): readable path}`` to name captured variables in meta.
    meta : extra facts for the graph's meta.
    prune : leave out the nodes neither the outputs nor the control outputs need, as TensorFlow
        does when it runs the function (`from_graphdef`'s ``fetches``; ``meta["pruned"]`` counts them).
    batch_size, input_shapes, unknown_dim : for a function traced with unknown dimensions (a SavedModel's
        signature): as `from_graphdef` takes them.

    Returns
    -------
    OpGraph
        With ``meta["inputs"]``, ``meta["outputs"]`` (fetch nodes), ``meta["control_outputs"]``
        (stateful ops the step must run, e.g. variable updates) and ``meta["captures"]``.
    """
    import tensorflow as tf

    if isinstance(fn, tf.types.experimental.ConcreteFunction):
        cf = fn
    else:
        if not isinstance(fn, tf.types.experimental.PolymorphicFunction):
            fn = tf.function(fn)
        cf = fn.get_concrete_function(*input_signature)
    graph_def = cf.graph.as_graph_def(add_shapes=True)
    variable_shapes, captures = _captures(cf, variable_paths or {})
    info = {
        "outputs": [t.op.name for t in cf.graph.outputs],
        "control_outputs": [op.name for op in cf.graph.control_outputs],
        "captures": captures,
    }
    info.update(meta or {})
    fetches = info["outputs"] + info["control_outputs"] if prune else None
    shape_options = {k: v for k, v in (("batch_size", batch_size), ("input_shapes", input_shapes),
                                       ("unknown_dim", unknown_dim)) if v is not None}
    return from_graphdef(graph_def, name, variable_shapes=variable_shapes, fold=fold, fetches=fetches, meta=info,
                         **shape_options)


def _captures(cf, variable_paths: dict[int, str]):
    """Shapes of captured variables, and a record of every capture for meta."""
    import tensorflow as tf
    from tensorflow.python.ops import handle_data_util

    by_handle = {id(v.handle): v for v in cf.graph.variables}
    shapes: dict[str, tuple[list[int], Any]] = {}
    records = []
    for external, internal in zip(cf.graph.external_captures, cf.graph.internal_captures):
        node = internal.op.name
        if internal.dtype != tf.resource:
            records.append({"placeholder": node, "kind": "tensor", "shape": internal.shape.as_list(),
                            "dtype": internal.dtype.name})
            continue
        var = by_handle.get(id(external))
        shape, dtype = None, None
        if var is not None:
            shape, dtype = var.shape.as_list(), var.dtype.base_dtype
        else:
            data = handle_data_util.get_resource_handle_data(internal)
            if data is not None and data.is_set and data.shape_and_type:
                st = data.shape_and_type[0]
                if not st.shape.unknown_rank:
                    shape, dtype = [d.size for d in st.shape.dim], tf.dtypes.as_dtype(st.dtype)
        if shape is None or any(d is None or d < 0 for d in shape):
            records.append({"placeholder": node, "kind": "resource"})
            continue
        shapes[node] = (shape, dtype)
        records.append({
            "placeholder": node, "kind": "variable",
            "variable": variable_paths.get(id(external), var.name if var is not None else node),
            "shape": shape, "dtype": dtype.name,
        })
    return shapes, records


def _optimizer(optimizer):
    import keras

    if optimizer is None:
        return keras.optimizers.SGD(learning_rate=0.01, momentum=0.9)
    if isinstance(optimizer, str):
        try:
            return keras.optimizers.get(optimizer)
        except ValueError:
            raise ModelImportError(f"unknown Keras optimizer {optimizer!r}") from None
    return optimizer


def _loss(loss):
    import keras

    if loss is None:
        loss = "mean_squared_error"
    if isinstance(loss, str):
        try:
            return loss, keras.losses.get(loss)
        except ValueError:
            raise ModelImportError(f"unknown Keras loss {loss!r}") from None
    return getattr(loss, "__name__", type(loss).__name__), loss


def _spec(shape, dtype, batch_size: int, what: str):
    import tensorflow as tf

    dims = list(shape)
    if dims and dims[0] is None:
        dims[0] = batch_size
    if any(d is None for d in dims):
        raise ModelImportError(f"{what} has unknown dimensions {list(shape)}; build the model with fixed "
                               "input shapes (e.g. input_shape=...)")
    return tf.TensorSpec(dims, dtype)


@dataclass
class KerasStep:
    """A Keras training step (or forward pass) ready to trace.

    Attributes
    ----------
    function : the `tf.function`.
    signature : its fixed-shape `tf.TensorSpec`s, in argument order.
    variable_paths : ``{id(variable handle): Keras variable path}``.
    meta : facts about the model and the step, for the graph's meta.
    """

    function: Any
    signature: list
    variable_paths: dict[int, str]
    meta: dict[str, Any]

    def concrete_function(self):
        """The traced concrete function (traced once, then cached by TensorFlow)."""
        return self.function.get_concrete_function(*self.signature)

    def graph_def(self):
        """The step's GraphDef, with ``_output_shapes`` so it re-imports to the same OpGraph."""
        return self.concrete_function().graph.as_graph_def(add_shapes=True)


def keras_step(model, batch_size: int, optimizer=None, training: bool = True, *, loss=None,
               target_specs: Sequence | None = None) -> KerasStep:
    """Build (not yet trace) one training step or forward pass of a Keras model.

    See `from_keras` for the parameters.
    """
    import tensorflow as tf

    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ModelImportError(f"batch size must be a positive integer, got {batch_size!r}")
    in_specs = [_spec(t.shape, t.dtype, batch_size, f"model input {k}") for k, t in enumerate(model.inputs)]
    out_specs = [_spec(t.shape, "float32", batch_size, f"model output {k}") for k, t in enumerate(model.outputs)]
    if target_specs is not None:
        out_specs = list(target_specs)
    single_in, single_out = len(in_specs) == 1, len(model.outputs) == 1
    x_sig = in_specs[0] if single_in else in_specs
    y_sig = out_specs[0] if single_out else out_specs
    info: dict[str, Any] = {
        "source": "keras",
        "keras_model": model.name,
        "batch_size": batch_size,
        "training": bool(training),
        "input_shapes": [list(s.shape) for s in in_specs],
        "param_count": int(model.count_params()),
    }
    paths = {id(v.value.handle): v.path for v in model.variables}

    if not training:
        @tf.function
        def forward(x):
            return model(x, training=False)

        return KerasStep(forward, [x_sig], paths, info)

    opt = _optimizer(optimizer)
    loss_name, loss_fn = _loss(loss)
    opt.build(model.trainable_variables)
    paths.update({id(v.value.handle): v.path for v in opt.variables})

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            pred = model(x, training=True)
            preds, ys = (pred, y) if not single_out else ([pred], [y])
            total = tf.add_n([tf.reduce_mean(loss_fn(t, p)) for t, p in zip(ys, preds)])
        grads = tape.gradient(total, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return total

    info.update({"optimizer": type(opt).__name__, "loss": loss_name})
    return KerasStep(train_step, [x_sig, y_sig], paths, info)


def from_keras(model, batch_size: int, optimizer=None, training: bool = True, *, loss=None,
               target_specs: Sequence | None = None, name: str | None = None,
               fold: Iterable[str] = DEFAULT_FOLD, meta: dict[str, Any] | None = None, prune: bool = True
               ) -> OpGraph:
    """One training step (or one forward pass) of a Keras model as an `OpGraph`.

    Parameters
    ----------
    model : a built Keras 3 model with fixed input shapes (batch dimension may be None).
    batch_size : the batch dimension of every input.
    optimizer : a Keras optimizer, its name, or None for SGD with momentum 0.9.
    training : False imports a forward pass only (``model(x, training=False)``).
    loss : a Keras loss name or ``loss(y_true, y_pred)``; default mean squared error.
    target_specs : `tf.TensorSpec`s of the targets; default: like the model's outputs, float32.
    name : the graph's name; default the model's name.
    fold : op types folded into their consumers (see `from_graphdef`).
    meta : extra facts for the graph's meta.
    prune : leave out the nodes TensorFlow would not run (`from_tf_function`).

    Raises
    ------
    ModelImportError
        If the batch size is not a positive integer, the model's input shapes
        are not fixed, or the optimizer or loss name is unknown.

    Examples
    --------
    >>> import keras
    >>> m = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])
    >>> g = from_keras(m, batch_size=2)
    >>> g.meta["training"], g.meta["batch_size"]
    (True, 2)
    """
    step = keras_step(model, batch_size, optimizer, training, loss=loss, target_specs=target_specs)
    info = dict(step.meta)
    info.update(meta or {})
    return from_tf_function(step.concrete_function(), step.signature, name or model.name, fold=fold,
                            variable_paths=step.variable_paths, meta=info, prune=prune)


def _application_table() -> dict[str, Any]:
    import keras

    table = {}
    for attr in dir(keras.applications):
        fn = getattr(keras.applications, attr)
        if attr[:1].isupper() and callable(fn):
            table[attr.lower()] = (attr, fn)
    return table


def application_model(app: str, input_shape: Sequence[int] | None = None, classes: int = 1000):
    """An untrained `keras.applications` model by name (``resnet50``, ``inception_v3``...).

    Built with ``weights=None``, so nothing is downloaded.

    Raises
    ------
    ModelImportError
        If no Keras application has that name, or it cannot take that input shape.
    """
    table = _application_table()
    key = app.replace("_", "").replace("-", "").lower()
    if key not in table:
        raise ModelImportError(f"unknown Keras application {app!r} (known: {', '.join(sorted(table))})")
    attr, ctor = table[key]
    kwargs: dict[str, Any] = {"weights": None, "classes": classes}
    if input_shape is not None:
        kwargs["input_shape"] = tuple(input_shape)
    try:
        return ctor(**kwargs)
    except (ValueError, TypeError) as e:
        raise ModelImportError(f"cannot build keras.applications.{attr}: {str(e).splitlines()[0]}") from None


def keras_application(app: str, batch_size: int, input_shape: Sequence[int] | None = None,
                      classes: int = 1000, **options: Any) -> OpGraph:
    """`from_keras` of `application_model(app, ...)`: a training step by default.

    The step uses categorical cross-entropy on one-hot targets unless ``loss``
    is given; other options go to `from_keras`.
    """
    model = application_model(app, input_shape, classes)
    options.setdefault("loss", "categorical_crossentropy")
    meta = {"source": f"keras.applications.{_application_table()[app.replace('_', '').replace('-', '').lower()][0]}"
                      " (weights=None)"}
    meta.update(options.pop("meta", None) or {})
    return from_keras(model, batch_size, name=options.pop("name", None) or app, meta=meta, **options)
