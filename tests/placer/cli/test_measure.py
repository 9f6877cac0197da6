"""`placer measure` and `placer export` end to end on a tiny graph."""

from __future__ import annotations

import json

import pytest

from placer.graph_io import save_graph
from placer.placement import save_placement
from tests.placer.measure.conftest import split_placement


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    import keras

    from placer.importers import keras_step
    from placer.importers.keras_models import from_tf_function
    from placer.measure import attach_graphdef

    keras.utils.set_random_seed(1)
    inp = keras.Input((8,))
    model = keras.Model(inp, keras.layers.Dense(3)(keras.layers.Dense(6, activation="relu")(inp)), name="cli_mlp")
    step = keras_step(model, 2)
    d = tmp_path_factory.mktemp("measure")
    graph = from_tf_function(step.concrete_function(), step.signature, "cli_mlp",
                             variable_paths=step.variable_paths, meta=step.meta)
    (d / "model.pb").write_bytes(step.graph_def().SerializeToString())
    save_graph(graph, d / "plain.json")
    attach_graphdef(graph, step.graph_def())
    save_graph(graph, d / "graph.json.gz")
    save_placement(split_placement(graph), d / "p.json")
    return d


def test_measure_json(cli, files):
    r = cli("measure", files / "graph.json.gz", "--placement", files / "p.json", "--devices", "2",
            "--warmup", "1", "--runs", "3", "--json")
    assert r.code == 0, r.err
    out = json.loads(r.out)
    assert out["median"] > 0 and out["runs"] == 3
    assert set(out["ops_per_device"]) == {"/device:CPU:0", "/device:CPU:1"}


def test_measure_shows_its_progress_on_stderr(cli, files):
    """A big graph takes minutes to build and run: each phase and step is shown as it goes (--quiet: none)."""
    argv = ["measure", files / "graph.json.gz", "--placement", files / "p.json", "--warmup", "1", "--runs", "2"]
    r = cli(*argv)
    assert r.code == 0, r.err
    lines = [line.split(" [")[0] for line in r.err.splitlines()]
    assert lines[0].startswith("cli_mlp: building the placed step in TensorFlow")
    for line in ("cli_mlp: running 1 warm-up and 2 timed steps", "cli_mlp: warm-up step 1/1",
                 "cli_mlp: timed step 2/2", "cli_mlp: traced one more step to see where ops ran"):
        assert line in lines
    assert "median step" in r.out
    r = cli(*argv, "--quiet")
    assert r.code == 0 and r.err == ""


def test_measure_graphdef_given_beside_the_graph(cli, files):
    r = cli("measure", files / "plain.json", "--graphdef", files / "model.pb", "--placement", files / "p.json",
            "--runs", "2")
    assert r.code == 0, r.err
    assert "median step" in r.out


def test_measure_graph_without_origin(cli, files):
    r = cli("measure", files / "plain.json", "--placement", files / "p.json")
    assert r.code == 1
    assert "carries no TensorFlow GraphDef" in r.err and len(r.err.strip().splitlines()) == 1


@pytest.mark.parametrize("command", ["measure", "export"])
def test_graph_without_origin_says_where_its_graphdef_comes_from(cli, files, tmp_path, command):
    """README's `placer measure graph.json.gz` fails for every graph file the CLI writes: the one line says
    which file to give (export runs nothing, so not "cannot be run")."""
    out = ["-o", tmp_path / "placed.pb"] if command == "export" else []
    r = cli(command, files / "plain.json", "--placement", files / "p.json", *out)
    assert r.code == 1 and len(r.err.strip().splitlines()) == 1
    assert "--graphdef model.pb" in r.err and "--save-graphdef" in r.err and "cannot be run" not in r.err


@pytest.mark.parametrize("content, message", [
    ("{not json", "not valid JSON"),
    ('{"devices": {"ghost": "/device:CPU:0"}}', "'ghost'"),
    ('{"devices": 3}', "'devices' must be an object"),
])
def test_bad_placement_file(cli, files, tmp_path, content, message):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    r = cli("measure", files / "graph.json.gz", "--placement", bad)
    assert r.code == 1
    assert message in r.err and len(r.err.strip().splitlines()) == 1


@pytest.mark.parametrize("threads", ["-1", "1025"])
def test_inter_op_threads_out_of_range(cli, files, threads):
    """Over 1024 is refused: a million threads was no error, TensorFlow started them all and the process was
    killed for memory (1025 here, so that the old code runs and this fails rather than being killed)."""
    r = cli("measure", files / "graph.json.gz", "--placement", files / "p.json", "--inter-op-threads", threads)
    assert r.code == 1 and len(r.err.strip().splitlines()) == 1
    assert f"--inter-op-threads must be between 0 and 1024, got {threads}" in r.err


@pytest.mark.parametrize("devices", ["0", "65", "9" * 20])
def test_devices_out_of_range(cli, files, devices):
    """100,000 logical CPUs ran and timed the step 30x slow; 3 million ran out of memory; past int64 TensorFlow
    refused the number: each is refused before anything runs."""
    r = cli("measure", files / "graph.json.gz", "--placement", files / "p.json", "--devices", devices)
    assert r.code == 1 and len(r.err.strip().splitlines()) == 1
    assert f"--devices must be an integer from 1 to 64, got {devices}" in r.err


def test_placement_on_missing_device(cli, files, tmp_path):
    p = json.loads((files / "p.json").read_text())
    p["devices"] = {k: "/device:GPU:1" for k in p["devices"]}
    (tmp_path / "gpu.json").write_text(json.dumps(p))
    r = cli("measure", files / "graph.json.gz", "--placement", tmp_path / "gpu.json")
    assert r.code == 1 and "GPU:1, which TensorFlow does not have" in r.err
    assert "another cluster" in r.err and len(r.err.strip().splitlines()) == 1  # no progress line before it


def test_placement_on_more_cpus_than_devices_says_which_devices(cli, files, tmp_path):
    """A placement for local:4 measured with the default --devices 2: one line (no progress first) naming the fix."""
    p = json.loads((files / "p.json").read_text())
    p["devices"] = {k: f"CPU:{i % 4}" for i, k in enumerate(p["devices"])}
    (tmp_path / "cpu4.json").write_text(json.dumps(p))
    r = cli("measure", files / "graph.json.gz", "--placement", tmp_path / "cpu4.json")
    assert r.code == 1 and len(r.err.strip().splitlines()) == 1
    assert "/device:CPU:3, which TensorFlow does not have here" in r.err and "give --devices 4" in r.err


def test_export(cli, files, tmp_path):
    from placer.measure.source import read_graphdef

    out = tmp_path / "placed.pb"
    r = cli("export", files / "model.pb", "--placement", files / "p.json", "-o", out, "--json")
    assert r.code == 0, r.err
    placed = read_graphdef(out)
    assert all(n.device in ("/device:CPU:0", "/device:CPU:1") for n in placed.node)
    assert json.loads(r.out)["nodes"] == len(placed.node)


def test_a_placement_of_the_pruned_step_fits_its_bare_graphdef(cli, files, tmp_path):
    """p.json places the step as import-keras imports it, without the nodes TF would not run; model.pb, a bare
    GraphDef, holds them too. Both commands take model.pb as that step (nothing placed is left unpinned or
    unrun); a placement that leaves out an op the step needs is still refused, naming it."""
    from placer.graph_io import load_graph

    pruned = load_graph(files / "plain.json").meta["pruned"]
    assert sum(n for t, n in pruned.items() if t not in ("Const", "NoOp")) > 0
    r = cli("measure", files / "model.pb", "--placement", files / "p.json", "--devices", "2",
            "--warmup", "0", "--runs", "1", "--json", "--quiet")
    assert r.code == 0, r.err
    p = json.loads((files / "p.json").read_text())
    needed = next(name for name in p["devices"] if name.endswith("MatMul"))
    del p["devices"][needed]
    (tmp_path / "short.json").write_text(json.dumps(p))
    for argv in (["measure"], ["export", "-o", tmp_path / "x.pb"]):
        r = cli(*argv, files / "model.pb", "--placement", tmp_path / "short.json")
        assert r.code == 1 and f"placement has no device for op {needed!r}" in r.err, r.err


@pytest.fixture(scope="module")
def open_batch(tmp_path_factory):
    """A forward pass saved with its batch dimension open (x: [?, 4]), as most GraphDefs are, and a placement."""
    import tensorflow as tf

    from placer.importers.graphdef import from_graphdef_bytes
    from placer.placement import Placement

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
    def forward(x):
        return tf.nn.relu(tf.matmul(x, tf.ones([4, 2])))

    d = tmp_path_factory.mktemp("open_batch")
    (d / "model.pb").write_bytes(forward.get_concrete_function().graph.as_graph_def().SerializeToString())
    graph = from_graphdef_bytes((d / "model.pb").read_bytes(), "model", batch_size=3)
    devices = {op.name: f"/device:CPU:{k % 2}" for k, op in enumerate(graph)}
    save_placement(Placement(graph.name, "local", "by_hand", devices), d / "p.json")
    return d


def test_export_a_graphdef_with_an_open_batch(cli, open_batch, tmp_path):
    """Pinning needs no shapes: README's `placer export model.pb` works on a model saved without a batch size."""
    from placer.measure.source import read_graphdef

    r = cli("export", open_batch / "model.pb", "--placement", open_batch / "p.json", "-o", tmp_path / "placed.pb")
    assert r.code == 0, r.err
    placed = read_graphdef(tmp_path / "placed.pb")
    assert {n.device for n in placed.node} == {"/device:CPU:0", "/device:CPU:1"}


def test_measure_a_graphdef_with_an_open_batch_says_how(cli, open_batch):
    """Measuring needs the inputs' shapes: the error says how to give them (measure has no --batch)."""
    r = cli("measure", open_batch / "model.pb", "--placement", open_batch / "p.json")
    assert r.code == 1 and len(r.err.strip().splitlines()) == 1
    assert "placeholder 'x' has no fixed shape ([?, 4])" in r.err and "placer import" in r.err
    assert "--batch B -o GRAPH" in r.err and "--graphdef" in r.err
