"""A tiny Keras training step with its GraphDef embedded, and placements of it, built once."""

from __future__ import annotations

import numpy as np
import pytest

from placer.placement import Placement

BATCH = 4
CPU0, CPU1 = "/device:CPU:0", "/device:CPU:1"


@pytest.fixture(scope="session")
def tiny():
    """16 -> Dense(8, relu) -> Dense(4), SGD with momentum: ``(model, optimizer, graph, graph_def)``."""
    import keras

    from placer.importers import keras_step
    from placer.importers.keras_models import from_tf_function
    from placer.measure import attach_graphdef

    keras.utils.set_random_seed(0)
    inp = keras.Input((16,))
    x = keras.layers.Dense(8, activation="relu", name="hidden")(inp)
    model = keras.Model(inp, keras.layers.Dense(4, name="head")(x), name="mlp")
    optimizer = keras.optimizers.SGD(0.01, momentum=0.9)
    step = keras_step(model, BATCH, optimizer)
    graph_def = step.graph_def()
    graph = from_tf_function(step.concrete_function(), step.signature, "mlp",
                             variable_paths=step.variable_paths, meta=step.meta)
    attach_graphdef(graph, graph_def)
    return model, optimizer, graph, graph_def


def split_placement(graph, seed: int = 0) -> Placement:
    """Colocation groups (or lone ops) spread at random over two CPUs, both used."""
    rng = np.random.default_rng(seed)
    chosen: dict[str, str] = {}
    devices = {}
    for k, op in enumerate(graph):
        key = op.colocation or op.name
        if key not in chosen:
            chosen[key] = (CPU0, CPU1)[int(rng.integers(2))] if k > 1 else (CPU0, CPU1)[k]
        devices[op.name] = chosen[key]
    return Placement(graph.name, "local", "random", devices)


@pytest.fixture(scope="session")
def split(tiny):
    return split_placement(tiny[2])
