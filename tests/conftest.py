"""Fixtures shared by the whole test tree."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # the tests' own Ray instances report nothing either

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def saved_models(tmp_path_factory):
    """Small models as users save them, written once: ``{"saved_model": DIR (Keras' model.export, 8 -> Dense(16,
    relu) -> Dense(4)), "compiled": that model compiled with Adam and mse, as .keras, "uncompiled": a .keras of
    8 -> Dense(4), "sparse": 8 -> Dense(3) compiled with sparse_categorical_crossentropy and SGD}``."""
    import keras

    keras.utils.set_random_seed(0)
    root = tmp_path_factory.mktemp("saved_models")
    mlp = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(4)],
                           name="mlp")
    mlp.compile(optimizer=keras.optimizers.Adam(1e-3), loss="mean_squared_error")
    mlp.export(str(root / "mlp_saved"), verbose=False)
    mlp.save(root / "mlp.keras")
    keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)], name="plain").save(root / "plain.keras")
    sparse = keras.Sequential([keras.Input((8,)), keras.layers.Dense(3)], name="classifier")
    sparse.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    sparse.save(root / "classifier.keras")
    return {"saved_model": root / "mlp_saved", "compiled": root / "mlp.keras", "uncompiled": root / "plain.keras",
            "sparse": root / "classifier.keras"}
