"""`placer import` and `placer import-keras`."""

import json

import pytest

from placer.graph_io import load_graph


@pytest.fixture(scope="module")
def tiny_pb(tmp_path_factory):
    """A TF1-style GraphDef with an unknown batch: x[?, 3] @ w[3, 2] -> relu."""
    import tensorflow as tf

    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        tf.nn.relu(tf.matmul(x, tf.constant([[1.0, 2.0]] * 3), name="mm"), name="out")
    folder = tmp_path_factory.mktemp("pb")
    tf.io.write_graph(g.as_graph_def(), str(folder), "tiny.pb", as_text=False)
    tf.io.write_graph(g.as_graph_def(), str(folder), "tiny.pbtxt", as_text=True)
    return folder


def test_import_graphdef_with_batch(cli, tiny_pb, tmp_path):
    out = tmp_path / "tiny.json.gz"
    r = cli("import", tiny_pb / "tiny.pb", "-o", out, "--batch", "8", "--json")
    assert r.code == 0, r.err
    s = json.loads(r.out)
    assert s["ops"] == 3 and s["tf_node_count"] == 4 and s["folded"] == {"Const": 1}
    g = load_graph(out)
    assert g["mm"].output_shapes == [[8, 2]] and g["mm"].flops == 2 * 8 * 3 * 2


def test_import_text_graphdef_with_input_shape(cli, tiny_pb, tmp_path):
    out = tmp_path / "t.json"
    r = cli("import", tiny_pb / "tiny.pbtxt", "-o", out, "--input-shape", "x=5,3", "--no-fold")
    assert r.code == 0, r.err
    assert "4 ops" in r.out
    assert load_graph(out)["out"].output_shapes == [[5, 2]]


def test_gzipped_graphdef(cli, tiny_pb, tmp_path):
    """A GraphDef compressed as our JSON graphs are (``model.pb.gz``, binary or text) is detected by its
    content and imported as the plain file is (it was called JSON and refused)."""
    import gzip

    for name in ("tiny.pb", "tiny.pbtxt"):
        packed = tmp_path / f"{name}.gz"
        packed.write_bytes(gzip.compress((tiny_pb / name).read_bytes()))
        r = cli("import", packed, "-o", tmp_path / "t.json", "--batch", "8", "--json")
        assert r.code == 0, r.err
        assert json.loads(r.out)["ops"] == 3 and load_graph(tmp_path / "t.json").name == "tiny"
    r = cli("import", tmp_path / "tiny.pb.gz", "-o", tmp_path / "t.json", "--allow-unknown-shapes", "--batch", "2")
    assert r.code == 0, r.err
    # an estimate never stands for the batch
    r = cli("import", tmp_path / "tiny.pb.gz", "-o", tmp_path / "t.json", "--allow-unknown-shapes")
    assert r.code == 1 and "give the batch size (--batch)" in r.err


def test_fetches_prune_what_no_fetch_needs(cli, tmp_path):
    """--fetch names what a session step runs; nodes none of them needs are left out, as TF leaves them out."""
    import tensorflow as tf

    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        out = tf.nn.relu(tf.matmul(x, tf.constant([[1.0, 2.0]] * 3), name="mm"), name="out")
        tf.identity(tf.square(out, name="unused_square"), name="unused_copy")
    tf.io.write_graph(g.as_graph_def(), str(tmp_path), "m.pb", as_text=False)
    r = cli("import", tmp_path / "m.pb", "-o", tmp_path / "m.json", "--batch", "8", "--fetch", "out")
    assert r.code == 0, r.err
    assert "3 ops" in r.out and "(6 TF nodes; folded 1 Const; pruned 2 that TensorFlow would not run)" in r.out
    assert set(load_graph(tmp_path / "m.json").index) == {"x", "mm", "out"}
    r = cli("import", tmp_path / "m.pb", "-o", tmp_path / "m.json", "--batch", "8")
    assert r.code == 0 and "5 ops" in r.out and "pruned" not in r.out
    r = cli("import", tmp_path / "m.pb", "-o", tmp_path / "m.json", "--batch", "8", "--fetch", "ouT")
    assert r.code == 1 and r.err.count("\n") == 1 and "fetch 'ouT' names no node of the graph" in r.err


def test_empty_name_is_refused(cli, tiny_pb, tmp_path):
    r = cli("import", tiny_pb / "tiny.pb", "-o", tmp_path / "t.json", "--batch", "8", "--name", " ")
    assert r.code == 1 and "--name must not be empty" in r.err


def test_unknown_batch_is_one_line(cli, tiny_pb, tmp_path):
    r = cli("import", tiny_pb / "tiny.pb", "-o", tmp_path / "x.json")
    assert r.code == 1
    assert r.err.count("\n") == 1 and "placeholder 'x' has unknown shape [?, 3]" in r.err


def test_json_graph_passes_through(cli, tmp_path):
    from placer.graph_io import save_graph
    from placer.synthetic import layered_graph

    save_graph(layered_graph(30), tmp_path / "g.json.gz")
    r = cli("import", tmp_path / "g.json.gz", "-o", tmp_path / "h.json")
    assert r.code == 0 and len(load_graph(tmp_path / "h.json")) == 30
    for flags in (["--batch", "2"], ["--fetch", "a"]):
        r = cli("import", tmp_path / "g.json.gz", "-o", tmp_path / "h.json", *flags)
        assert r.code == 1 and f"{flags[0]} applies to GraphDef input" in r.err


@pytest.mark.parametrize("content,message", [
    (b"hello, not a model", "not a recognised model file"),
    (b"\x0a\xff\xff\xff\xff\x0fxx", "corrupt or truncated"),
    (b"\x89HDF\r\n\x1a\n" + bytes(100), "a Keras HDF5 (.h5) file, which `placer import` does not read"),
])
def test_bad_files(cli, tmp_path, content, message):
    (tmp_path / "m.pb").write_bytes(content)
    r = cli("import", tmp_path / "m.pb", "-o", tmp_path / "x.json")
    assert r.code == 1 and message in r.err and r.err.count("\n") == 1


@pytest.mark.parametrize("content,message", [
    (b'{"name": "g", "nodes": [{"name": "a", "op": "T"}, {"name": "a", "op": "T"}]}', "op 'a': duplicate name"),
    (b"\x1f\x8b\x08 not really gzip", "corrupt gzip data"),
    (b'{"name": "g", "nodes": [', "not valid JSON"),
])
def test_a_bad_json_graph_names_the_file(cli, tmp_path, content, message):
    """The JSON loader sees bytes only; the error still says which file (as for a GraphDef)."""
    (tmp_path / "m.json").write_bytes(content)
    r = cli("import", tmp_path / "m.json", "-o", tmp_path / "x.json")
    assert r.code == 1 and r.err.count("\n") == 1
    assert r.err.startswith(f"placer import: error: {str(tmp_path / 'm.json')!r}: ") and message in r.err


def test_bad_input_shape_syntax(cli, tiny_pb, tmp_path):
    r = cli("import", tiny_pb / "tiny.pb", "-o", tmp_path / "x.json", "--input-shape", "x:5,3")
    assert r.code == 1 and "expected NODE=D1,D2" in r.err


@pytest.mark.parametrize("flags, message", [
    (["--input-shape", "x=5,4"], "input shape [5, 4] given for placeholder 'x' does not fit its declared shape [?, 3]"),
    (["--input-shape", "x=5,3,1"], "input shape [5, 3, 1] given for placeholder 'x' does not fit"),
    (["--input-shape", "out=5,2"], "input shape given for 'out', a Relu node: only the model's input placeholders"),
    (["--input-shape", "x=5,3", "--input-shape", "x=6,3"], "--input-shape given twice for 'x'"),
    (["--input-shape", "x=5," + "9" * 20], "integers from 0 to 2147483647"),
    (["--batch", "9" * 23], "--batch must be an integer from 1 to 2147483647"),
    (["--batch", "2", "--unknown-dim", "9" * 20], "--unknown-dim must be an integer from 1 to 2147483647"),
])
def test_input_shapes_that_do_not_fit_are_refused(cli, tiny_pb, tmp_path, flags, message):
    """A shape the model can never take is not recorded as if it could; a flag is never silently dropped."""
    r = cli("import", tiny_pb / "tiny.pb", "-o", tmp_path / "x.json", *flags)
    assert r.code == 1 and message in r.err and r.err.count("\n") == 1, r.err
    assert not (tmp_path / "x.json").exists()


def test_import_keras_application(cli, tmp_path):
    out, pb = tmp_path / "m.json.gz", tmp_path / "m.pb"
    r = cli("import-keras", "mobilenet", "--batch", "2", "--input-shape", "32,32,3", "--classes", "10",
            "-o", out, "--save-graphdef", pb, "--json")
    assert r.code == 0, r.err
    s = json.loads(r.out)
    g = load_graph(out)
    assert s["ops"] == len(g) and g.meta["batch_size"] == 2 and g.meta["training"] is True
    assert s["graphdef_output"] == str(pb) and pb.stat().st_size > 0
    assert any(op.op == "Conv2DBackpropFilter" for op in g)
    # pruned by default: TF does not compute the gradient with respect to the images, nor is it kept here
    assert s["pruned"]["Conv2DBackpropInput"] == 1
    dead_ops = sum(n for t, n in s["pruned"].items() if t not in ("Const", "NoOp"))
    r = cli("import", pb, "-o", tmp_path / "again.json", "--json")  # the function's outputs found: the same step
    assert r.code == 0 and json.loads(r.out)["ops"] == len(g)
    r = cli("import", pb, "-o", tmp_path / "again.json", "--json", "--no-prune")
    assert r.code == 0 and json.loads(r.out)["ops"] == len(g) + dead_ops
    fetches = [a for f in g.meta["fetches"] for a in ("--fetch", f)]
    r = cli("import", pb, "-o", tmp_path / "again.json", "--json", *fetches)
    assert r.code == 0 and json.loads(r.out)["ops"] == len(g)
    r = cli("import-keras", "mobilenet", "--batch", "2", "--input-shape", "32,32,3", "--classes", "10",
            "-o", tmp_path / "kept.json", "--no-prune", "--json")
    assert r.code == 0 and json.loads(r.out)["ops"] == len(g) + dead_ops and not json.loads(r.out)["pruned"]
    from collections import Counter

    kept_types = Counter(op.op for op in load_graph(tmp_path / "kept.json"))
    dead_types = {t: n for t, n in s["pruned"].items() if t not in ("Const", "NoOp")}
    assert kept_types - Counter(op.op for op in g) == dead_types


def test_import_keras_unknown_name(cli, tmp_path):
    r = cli("import-keras", "resnet5000", "--batch", "2", "-o", tmp_path / "x.json")
    assert r.code == 1 and "unknown Keras application 'resnet5000'" in r.err


def test_the_summary_names_every_file_written(capsys):
    from placer.cli.import_graph import print_summary

    print_summary({"name": "m", "ops": 3, "edges": 2, "tf_node_count": None, "folded": None, "total_flops": 1e9,
                   "variable_bytes": None, "flops_fallback": None, "colocation_groups": 0, "output": "m.json",
                   "graphdef_output": "m.pb"})
    out = capsys.readouterr().out
    assert "wrote m.json\n" in out and "wrote m.pb (the traced GraphDef)\n" in out


@pytest.mark.parametrize("argv, flag", [
    (["import", "{pb}", "-o", "{missing}/g.json"], "-o"),
    (["import-keras", "mobilenet", "--batch", "2", "-o", "{tmp}/g.json", "--save-graphdef", "{missing}/m.pb"],
     "--save-graphdef"),
    (["simulate", "{tmp}/g.json", "--cluster", "2gpu", "--placement", "{tmp}/p.json", "--trace", "{missing}/t.json"],
     "--trace"),
])
def test_an_output_in_a_missing_folder_is_refused_before_any_work(cli, tiny_pb, tmp_path, argv, flag):
    """Like most Unix tools: a mistyped folder is an error, and nothing is created (only run folders, --out DIR,
    are made)."""
    missing = tmp_path / "no" / "such"
    r = cli(*[a.format(pb=tiny_pb / "tiny.pb", missing=missing, tmp=tmp_path) for a in argv])
    assert r.code == 1 and f"{flag} " in r.err and "does not exist" in r.err and r.err.count("\n") == 1
    assert not (tmp_path / "no").exists()


def test_format_help_lists_the_formats(cli):
    """--help names the formats --format takes (it pointed at a --list-formats option that does not exist)."""
    from placer.cli.import_graph import BUILTIN_FORMATS
    from placer.importers import FORMATS

    assert tuple(FORMATS)[:len(BUILTIN_FORMATS)] == BUILTIN_FORMATS  # a test may register more
    r = cli("import", "--help")
    assert "--list-formats" not in r.out
    assert "msr, pipedream, json, pbtxt, graphdef" in " ".join(r.out.split())


@pytest.fixture(scope="module")
def function_pb(tmp_path_factory):
    """A tf.function step's GraphDef (add_shapes=True), batch free: a dead Square, a variable update, and a
    segment sum whose row count depends on the ids' values."""
    import tensorflow as tf

    w = tf.Variable(tf.ones([4, 8]))

    @tf.function
    def step(x, ids):
        tf.square(x, name="dead")
        h = tf.matmul(x, w.read_value())
        w.assign_add(tf.zeros([4, 8]))
        return tf.reduce_sum(tf.math.unsorted_segment_sum(h, ids, tf.reduce_max(ids) + 1))

    cf = step.get_concrete_function(tf.TensorSpec([None, 4]), tf.TensorSpec([None], tf.int32))
    path = tmp_path_factory.mktemp("fn") / "step.pb"
    path.write_bytes(cf.graph.as_graph_def(add_shapes=True).SerializeToString())
    return path


def test_a_tf_function_graphdef_runs_its_outputs_and_estimates_say_so(cli, function_pb, tmp_path):
    """Without --fetch the function's outputs are found (the dead Square left out); a data-dependent dimension
    is an error naming --unknown-dim, though --batch was given; the estimate is recorded and validate says so."""
    out = tmp_path / "step.json"
    r = cli("import", function_pb, "-o", out)
    assert r.code == 1 and "give the batch size (--batch)" in r.err and "batch_size" not in r.err
    r = cli("import", function_pb, "-o", out, "--batch", "8")
    assert r.code == 1 and r.err.count("\n") == 1
    assert "UnsortedSegmentSum" in r.err and "--unknown-dim N" in r.err and "--batch" not in r.err
    r = cli("import", function_pb, "-o", out, "--batch", "8", "--unknown-dim", "64")
    assert r.code == 0, r.err
    assert "the tf.function's outputs" in r.out and "ESTIMATED: 1 op" in r.out
    g = load_graph(out)
    assert "dead" not in g.index and g.meta["fetches_from"] == "tf.function outputs"
    assert g.meta["unknown_dims"]["estimate"] == 64
    r = cli("validate", out)
    assert r.code == 0 and "imported with unknowns: 1 op" in r.out and "estimate 64 (--unknown-dim)" in r.out
    r = cli("validate", out, "--json")
    assert json.loads(r.out)["imported_with_unknowns"] is True
    r = cli("import", function_pb, "-o", out, "--batch", "8", "--unknown-dim", "64", "--no-prune")
    assert r.code == 0 and "dead" in load_graph(out).index
