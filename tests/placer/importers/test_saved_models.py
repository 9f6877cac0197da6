"""`placer.importers.saved_models`: a SavedModel's signature and a .keras file's training step."""

import pytest

from placer.errors import ModelImportError
from placer.importers.saved_models import from_keras_file, from_saved_model, is_keras_file, is_saved_model

MLP_WEIGHT_BYTES = (8 * 16 + 16 + 16 * 4 + 4) * 4
"""8 -> Dense(16) -> Dense(4) in float32."""


def test_saved_model_signature_is_an_inference_graph_with_its_variables(saved_models):
    graph = from_saved_model(saved_models["saved_model"], batch_size=32)
    assert graph.meta["signature"] == "serving_default" and "serve" in graph.meta["signatures"]
    assert graph.meta["variable_bytes"] == MLP_WEIGHT_BYTES and graph.meta["training"] is False
    assert graph.meta["inputs"][0]["shape"] == [32, 8]
    matmuls = sorted(op.flops for op in graph if op.op == "MatMul")
    assert matmuls == [2 * 32 * 16 * 4, 2 * 32 * 8 * 16]
    assert graph.name == "mlp_saved"


def test_saved_model_names_its_signatures_and_the_batch_flag(saved_models):
    with pytest.raises(ModelImportError, match=r"no signature 'train'; give one of serve, serving_default "
                                               r"\(--signature NAME\)"):
        from_saved_model(saved_models["saved_model"], signature="train", batch_size=2)
    with pytest.raises(ModelImportError, match=r"--batch"):
        from_saved_model(saved_models["saved_model"])
    assert from_saved_model(saved_models["saved_model"], signature="serve", batch_size=2).meta["signature"] == "serve"


def test_keras_file_step_uses_the_compiled_loss_and_optimizer(saved_models):
    graph = from_keras_file(saved_models["compiled"], 4)
    assert graph.meta["loss"] == "mean_squared_error" and graph.meta["optimizer"] == "Adam"
    assert graph.meta["optimizer_from"] == graph.meta["loss_from"] == "compiled" and graph.meta["training"] is True
    # weights plus Adam's two slots per weight (and its iteration count and learning rate)
    assert 3 * MLP_WEIGHT_BYTES <= graph.meta["variable_bytes"] < 3 * MLP_WEIGHT_BYTES + 64


def test_keras_file_given_loss_and_optimizer_win(saved_models):
    graph = from_keras_file(saved_models["compiled"], 4, loss="mean_absolute_error", optimizer="sgd")
    assert graph.meta["loss"] == "mean_absolute_error" and graph.meta["optimizer"] == "SGD"
    assert graph.meta["optimizer_from"] == graph.meta["loss_from"] == "given"


def test_the_graph_def_returned_holds_every_op(saved_models):
    """The signature calls the model's function: its GraphDef is returned with that call inlined, as the
    ops are, so it can run and pin the graph (``--save-graphdef``, ``placer profile --graphdef``)."""
    graph, graph_def = from_saved_model(saved_models["saved_model"], batch_size=2, with_graph_def=True)
    nodes = {n.name for n in graph_def.node}
    assert any(op.name.startswith("StatefulPartitionedCall/") for op in graph)
    assert all(op.name in nodes for op in graph)
    assert not any(n.op == "StatefulPartitionedCall" for n in graph_def.node)


def test_uncompiled_keras_file_needs_loss_and_optimizer(saved_models):
    with pytest.raises(ModelImportError, match=r"without a loss .*\(--loss"):
        from_keras_file(saved_models["uncompiled"], 4)
    with pytest.raises(ModelImportError, match=r"without an optimizer .*\(--optimizer"):
        from_keras_file(saved_models["uncompiled"], 4, loss="mse")
    assert len(from_keras_file(saved_models["uncompiled"], 4, loss="mse", optimizer="sgd")) > 0


def test_sparse_loss_traces_with_class_index_targets(saved_models):
    graph = from_keras_file(saved_models["sparse"], 4)
    assert graph.meta["loss"] == "sparse_categorical_crossentropy"
    y = next(i for i in graph.meta["inputs"] if i["dtype"] == "int32")
    assert y["shape"] == [4]


def test_what_is_not_a_saved_model_or_keras_file(saved_models, tmp_path):
    (tmp_path / "empty").mkdir()
    assert not is_saved_model(tmp_path / "empty") and is_saved_model(saved_models["saved_model"])
    assert is_keras_file(saved_models["compiled"]) and not is_keras_file(saved_models["saved_model"])
    with pytest.raises(ModelImportError, match="not a SavedModel folder"):
        from_saved_model(tmp_path / "empty")
    bad = tmp_path / "bad.keras"
    bad.write_bytes(b"PK\x03\x04 not a zip")
    with pytest.raises(ModelImportError, match="not a .keras file"):
        from_keras_file(bad, 2)
