"""`placer profile` end to end on the tiny training step."""

from __future__ import annotations

import json

import pytest

from placer.graph_io import load_graph


def test_profile_writes_costs_and_the_fit(cli, tmp_path, tiny_step):
    graph, pb = tiny_step(tmp_path)
    r = cli("profile", graph, "--graphdef", pb, "--cluster", "local", "--warmup", "1", "--runs", "2",
            "-o", tmp_path / "out.json.gz", "--json")
    assert r.code == 0, r.err
    summary = json.loads(r.out)["profiles"][0]
    assert summary["kind"] == "cpu-local" and summary["ops_timed"] > 0 and summary["fit"]["ops"] > 0
    out = load_graph(tmp_path / "out.json.gz")
    assert "cpu-local" in out.meta["roofline_fit"] and "tf_graphdef" in out.meta
    assert any("cpu-local" in op.cost for op in out)
    assert "traced step 2/2" in r.err  # progress on stderr


@pytest.mark.parametrize("kind, flag, batch", [("saved_model", "--saved-model", "16"), ("compiled", "--keras", "4")])
def test_profile_runs_the_step_traced_from_the_model(cli, tmp_path, saved_models, kind, flag, batch):
    """A SavedModel's signature or a .keras file's training step is traced again, as the import traced it."""
    model = saved_models[kind]
    assert cli("import", model, "--batch", batch, "-o", tmp_path / "g.json").code == 0
    r = cli("profile", tmp_path / "g.json", flag, model, "--cluster", "local", "--warmup", "0", "--runs", "1",
            "-o", tmp_path / "out.json", "--json", "--quiet")
    assert r.code == 0, r.err
    summary = json.loads(r.out)["profiles"][0]
    assert summary["ops_timed"] > 0
    out = load_graph(tmp_path / "out.json")
    assert "tf_graphdef" in out.meta  # measure and export need no model now
    timed = [op for op in out if "cpu-local" in op.cost]
    assert len(timed) == summary["ops_timed"]
    if kind == "compiled":
        assert {"Sqrt", "AssignSubVariableOp"} <= {op.op for op in timed}  # the compiled Adam's update ran


def test_a_saved_models_graphdef_runs_its_graph(cli, tmp_path, saved_models):
    """``import --save-graphdef`` writes the GraphDef the ops are nodes of (calls inlined), so it profiles."""
    assert cli("import", saved_models["saved_model"], "--batch", "2", "-o", tmp_path / "g.json",
               "--save-graphdef", tmp_path / "g.pb").code == 0
    r = cli("profile", tmp_path / "g.json", "--graphdef", tmp_path / "g.pb", "--cluster", "local",
            "--warmup", "0", "--runs", "1", "-o", tmp_path / "out.json", "--quiet")
    assert r.code == 0, r.err


@pytest.mark.parametrize("kind, argv, message", [
    ("compiled", ["--keras", "{compiled}", "--batch", "8"], "--batch 8: graph 'mlp' was imported with batch size 4"),
    ("compiled", ["--saved-model", "{saved_model}"], "of graph 'mlp' is no node of signature 'serving_default'"),
    ("saved_model", ["--saved-model", "{saved_model}", "--signature", "serve"],
     "--signature serve: graph 'mlp_saved' was imported from signature 'serving_default'"),
    ("saved_model", ["--keras", "{saved_model}"], "is not a .keras file"),
    ("compiled", ["--keras", "{compiled}", "--signature", "serve"], "--signature applies to --saved-model"),
    ("saved_model", ["--saved-model", "{saved_model}", "--batch", "2"], "--batch applies to --keras"),
])
def test_a_model_that_does_not_match_is_a_one_line_error(cli, tmp_path, saved_models, kind, argv, message):
    batch = "4" if kind == "compiled" else "2"
    assert cli("import", saved_models[kind], "--batch", batch, "-o", tmp_path / "g.json").code == 0
    argv = [a.format(**saved_models) for a in argv]
    r = cli("profile", tmp_path / "g.json", *argv, "--cluster", "local", "-o", tmp_path / "out.json")
    assert r.code == 1 and message in r.err and r.err.count("\n") == 1, r.err


def test_unknown_device(cli, tmp_path, tiny_step):
    graph, pb = tiny_step(tmp_path)
    r = cli("profile", graph, "--graphdef", pb, "--cluster", "local", "--device", "/device:GPU:0",
            "-o", tmp_path / "out.json")
    assert r.code == 1 and "no such device" in r.err


def test_another_machines_preset_is_refused(cli, tmp_path, tiny_step):
    """Costs timed here stored under 2gpu's kind "cpu" would pass for that host's CPU."""
    graph, pb = tiny_step(tmp_path)
    r = cli("profile", graph, "--graphdef", pb, "--cluster", "2gpu", "-o", tmp_path / "out.json")
    assert r.code == 1 and "--cluster 2gpu: a preset describes another machine" in r.err
    assert not (tmp_path / "out.json").exists()
