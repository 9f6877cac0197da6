"""Tiny Keras models and their training-step graphs, built once per test session."""

from __future__ import annotations

import pytest

BATCH = 4


@pytest.fixture(scope="session")
def keras():
    import keras

    keras.utils.set_random_seed(0)
    return keras


@pytest.fixture(scope="session")
def dense_model(keras):
    """16 -> Dense(8, relu) -> Dense(4)."""
    inp = keras.Input((16,))
    x = keras.layers.Dense(8, activation="relu", name="hidden")(inp)
    out = keras.layers.Dense(4, name="head")(x)
    return keras.Model(inp, out, name="mlp")


@pytest.fixture(scope="session")
def conv_model(keras):
    """8x8x3 image -> Conv2D(5 filters, 3x3, valid) -> flatten -> Dense(2)."""
    inp = keras.Input((8, 8, 3))
    x = keras.layers.Conv2D(5, 3, name="conv")(inp)
    x = keras.layers.Flatten()(x)
    out = keras.layers.Dense(2, name="head")(x)
    return keras.Model(inp, out, name="convnet")


@pytest.fixture(scope="session")
def lstm_model(keras):
    """Token ids (6 steps) -> Embedding(50, 8) -> unrolled LSTM(12) -> Dense(50) per step."""
    inp = keras.Input((6,), dtype="int32")
    x = keras.layers.Embedding(50, 8)(inp)
    x = keras.layers.LSTM(12, return_sequences=True, unroll=True, name="lstm")(x)
    out = keras.layers.Dense(50, name="logits")(x)
    return keras.Model(inp, out, name="lstm_lm")


@pytest.fixture(scope="session")
def dense_graph(dense_model):
    from placer.importers import from_keras

    return from_keras(dense_model, BATCH)


@pytest.fixture(scope="session")
def conv_graph(conv_model):
    from placer.importers import from_keras

    return from_keras(conv_model, BATCH)


@pytest.fixture(scope="session")
def lstm_graph(lstm_model):
    import tensorflow as tf

    from placer.importers import from_keras

    return from_keras(lstm_model, BATCH, optimizer="adam", loss=_sparse_ce,
                      target_specs=[tf.TensorSpec((BATCH, 6), tf.int32)])


def _sparse_ce(y, p):
    import keras

    return keras.losses.sparse_categorical_crossentropy(y, p, from_logits=True)
