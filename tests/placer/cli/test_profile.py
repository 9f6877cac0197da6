"""`placer profile` end to end on the tiny training step."""

from __future__ import annotations

import json

from placer.graph_io import load_graph, save_graph


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


def test_saved_model_is_not_loadable_yet(cli, tmp_path, tiny_step):
    graph, _ = tiny_step(tmp_path)
    r = cli("profile", graph, "--saved-model", tmp_path, "-o", tmp_path / "out.json")
    assert r.code == 1 and "--saved-model" in r.err and "--graphdef" in r.err


def test_unknown_device(cli, tmp_path, tiny_step):
    graph, pb = tiny_step(tmp_path)
    r = cli("profile", graph, "--graphdef", pb, "--cluster", "local", "--device", "/device:GPU:0",
            "-o", tmp_path / "out.json")
    assert r.code == 1 and "no such device" in r.err
