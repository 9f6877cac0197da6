"""`placer import` of what users save: a SavedModel folder and a .keras file."""

import json

import pytest

from placer.graph_io import load_graph


def test_import_saved_model_signature(cli, saved_models, tmp_path):
    out, pb = tmp_path / "sm.json.gz", tmp_path / "sm.pb"
    r = cli("import", saved_models["saved_model"], "-o", out, "--batch", "16", "--signature", "serve",
            "--save-graphdef", pb, "--json")
    assert r.code == 0, r.err
    s = json.loads(r.out)
    assert s["variable_bytes"] == (8 * 16 + 16 + 16 * 4 + 4) * 4 and s["graphdef_output"] == str(pb)
    g = load_graph(out)
    assert g.meta["signature"] == "serve" and g.meta["inputs"][0]["shape"] == [16, 8]
    assert pb.stat().st_size > 0


def test_import_keras_file_traces_its_compiled_training_step(cli, saved_models, tmp_path):
    out = tmp_path / "k.json"
    r = cli("import", saved_models["compiled"], "-o", out, "--batch", "4")
    assert r.code == 0, r.err
    assert "mlp: " in r.out and "variables" in r.out
    g = load_graph(out)
    assert g.meta["optimizer"] == "Adam" and g.meta["loss"] == "mean_squared_error" and g.meta["batch_size"] == 4


@pytest.mark.parametrize("which, argv, message", [
    ("compiled", [], "give the batch size of the training step (--batch)"),
    ("uncompiled", ["--batch", "2"], "saved without a loss (not compiled); give one (--loss"),
    ("compiled", ["--batch", "2", "--signature", "x"], "--signature does not apply to a .keras file"),
    ("saved_model", ["--batch", "2", "--loss", "mse", "--fetch", "y"], "--fetch, --loss do not apply to a SavedModel"),
    ("saved_model", ["--batch", "2", "--signature", "nope"], "no signature 'nope'; give one of serve, serving_default"),
    ("compiled", ["--batch", "2", "--loss", "no_such_loss"], "unknown Keras loss 'no_such_loss'"),
])
def test_bad_options_are_one_line(cli, saved_models, tmp_path, which, argv, message):
    r = cli("import", saved_models[which], "-o", tmp_path / "x.json", *argv)
    assert r.code == 1 and message in r.err and r.err.count("\n") == 1, r.err


def test_a_folder_that_is_no_saved_model_and_options_for_other_files(cli, tmp_path):
    (tmp_path / "dir").mkdir()
    r = cli("import", tmp_path / "dir", "-o", tmp_path / "x.json")
    assert r.code == 1 and "is a folder but not a SavedModel (no saved_model.pb" in r.err
    (tmp_path / "g.json").write_text(json.dumps({"name": "g", "nodes": [{"name": "a", "op": "T"}]}))
    r = cli("import", tmp_path / "g.json", "-o", tmp_path / "x.json", "--signature", "s")
    assert r.code == 1 and "--signature applies to a SavedModel folder or a .keras file" in r.err
