"""GraphDef files: round trip, folding, shapes, colocation, errors."""

from __future__ import annotations

import pytest

from placer.errors import ModelImportError
from placer.importers import from_graphdef, from_tf_function, import_file, keras_step
from tests.placer.importers.conftest import BATCH


def _graph_dict(g):
    return [op.to_dict() for op in g]


@pytest.fixture(scope="module")
def conv_step(conv_model):
    return keras_step(conv_model, BATCH)


@pytest.fixture(scope="module")
def conv_step_graph(conv_step):
    """The OpGraph of exactly the traced function whose GraphDef the tests write (pruned, the default)."""
    return from_tf_function(conv_step.concrete_function(), conv_step.signature, "step",
                            variable_paths=conv_step.variable_paths)


@pytest.fixture(scope="module")
def conv_step_graph_unpruned(conv_step):
    """The same, every node kept: what a GraphDef file imports to when no fetches are given."""
    return from_tf_function(conv_step.concrete_function(), conv_step.signature, "step",
                            variable_paths=conv_step.variable_paths, prune=False)


class TestRoundTrip:
    @pytest.mark.parametrize("as_text,suffix", [(False, "pb"), (True, "pbtxt")])
    def test_written_by_tf_and_reread_is_the_same_graph(self, tmp_path, conv_step, conv_step_graph_unpruned,
                                                        as_text, suffix):
        import tensorflow as tf

        tf.io.write_graph(conv_step.graph_def(), str(tmp_path), f"step.{suffix}", as_text=as_text)
        g = import_file(tmp_path / f"step.{suffix}")
        assert g.name == "step"
        assert _graph_dict(g) == _graph_dict(conv_step_graph_unpruned)
        for key in ("tf_node_count", "op_count", "folded", "total_flops", "variable_bytes", "colocation_groups",
                    "inputs", "control_edges", "folded_const_bytes"):
            assert g.meta[key] == conv_step_graph_unpruned.meta[key], key

    def test_reread_with_the_fetches_is_the_same_pruned_graph(self, conv_step, conv_step_graph):
        from placer.importers.graphdef import from_graphdef_bytes

        g = from_graphdef_bytes(conv_step.graph_def().SerializeToString(), "step",
                                fetches=conv_step_graph.meta["fetches"])
        assert _graph_dict(g) == _graph_dict(conv_step_graph)
        assert g.meta["pruned"] == conv_step_graph.meta["pruned"]

    def test_format_detected_by_content_not_name(self, tmp_path, conv_step):
        (tmp_path / "model.json").write_bytes(conv_step.graph_def().SerializeToString())
        assert len(import_file(tmp_path / "model.json")) > 10

    def test_without_folding_every_tf_node_is_an_op(self, conv_step):
        gd = conv_step.graph_def()
        g = from_graphdef(gd, "raw", fold=())
        assert len(g) == len(gd.node) == g.meta["tf_node_count"]
        assert g.meta["folded"] == {}
        assert [op.name for op in g] == [n.name for n in gd.node]

    def test_folded_constants_become_consumer_bytes(self, conv_step, conv_step_graph):
        gd = conv_step.graph_def()
        consts = {n.name for n in gd.node if n.op == "Const"}
        assert consts and not consts & set(conv_step_graph.index)
        assert conv_step_graph.meta["folded_const_bytes"] > 0


class TestPruning:
    """Nodes TensorFlow would not run for the step's fetches are left out, as its function runtime does."""

    def test_dead_gradient_nodes_are_left_out_and_counted(self, conv_step, conv_step_graph, conv_step_graph_unpruned):
        g, full = conv_step_graph, conv_step_graph_unpruned
        dead = set(full.index) - set(g.index)
        assert not set(g.index) - set(full.index)
        # the gradient with respect to the input images: TF's Conv2D gradient makes it, nothing reads it
        assert any(full[n].op == "Conv2DBackpropInput" for n in dead)
        assert not any(op.op == "Conv2DBackpropInput" for op in g)
        assert "pruned" not in full.meta and sum(g.meta["pruned"].values()) >= len(dead)
        m = g.meta
        assert m["tf_node_count"] == full.meta["tf_node_count"] == len(conv_step.graph_def().node)
        assert m["tf_node_count"] - sum(m["folded"].values()) - sum(m["pruned"].values()) == len(g)
        assert m["fetches"] == m["outputs"] + m["control_outputs"]
        assert m["total_flops"] < full.meta["total_flops"]

    def test_stateful_ops_stay_even_when_nothing_reads_them(self):
        import tensorflow as tf

        v = tf.Variable(tf.ones([3, 3]))

        @tf.function
        def f(x):
            tf.raw_ops.ReadVariableOp(resource=v.handle, dtype=tf.float32, name="unused_read")
            _ = tf.identity(tf.square(x), name="unused_square")
            return tf.matmul(x, v, name="mm")

        sig = [tf.TensorSpec([2, 3])]
        g = from_tf_function(f, sig, "f")
        assert "mm" in g.index and "unused_read" in g.index
        assert "unused_square" not in g.index and g.meta["pruned"] == {"Identity": 1, "Square": 1}
        assert "unused_square" in from_tf_function(f, sig, "f", prune=False).index

    def test_without_fetches_nothing_is_pruned(self, conv_step):
        g = from_graphdef(conv_step.graph_def(), "step")
        assert "pruned" not in g.meta and "fetches" not in g.meta

    def test_a_tensor_name_or_control_input_fetches_its_node(self, conv_step, conv_step_graph):
        """A session is given ``loss:0`` and ``^train`` as often as node names; both stand for the node."""
        fetches = conv_step_graph.meta["fetches"]
        spelled = [f"{fetches[0]}:0", *(f"^{f}" for f in fetches[1:])]
        g = from_graphdef(conv_step.graph_def(), "step", fetches=spelled)
        assert _graph_dict(g) == _graph_dict(conv_step_graph) and g.meta["fetches"] == fetches

    @pytest.mark.parametrize("index", ["1", "99"])
    def test_a_tensor_its_node_does_not_have_is_one_clear_error(self, conv_step, conv_step_graph, index):
        """TensorFlow refuses to fetch Identity:1 of a one-output Identity; it was pruned for as Identity."""
        fetches = conv_step_graph.meta["fetches"]
        with pytest.raises(ModelImportError, match=f"fetch '{fetches[0]}:{index}': node '{fetches[0]}' has 1 "
                                                   f"output\\(s\\), so no tensor {fetches[0]}:{index}"):
            from_graphdef(conv_step.graph_def(), "step", fetches=[f"{fetches[0]}:{index}", *fetches[1:]])

    def test_a_session_runs_only_what_its_fetches_need(self):
        """A TF1 graph holds each variable's initializer; a session fetching the train op does not run it
        (they were kept as stateful, so every step was simulated initializing every weight)."""
        import tensorflow as tf

        g = tf.Graph()
        with g.as_default():
            x = tf.compat.v1.placeholder(tf.float32, [4, 3], name="x")
            v = tf.compat.v1.get_variable("v", [3, 2], use_resource=True)
            loss = tf.reduce_sum(tf.matmul(x, v, name="mm"), name="loss")
            tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, name="train")
            tf.compat.v1.global_variables_initializer()
        gd = g.as_graph_def()
        session = from_graphdef(gd, "tf1", fetches=["train", "loss:0"], session=True)
        function = from_graphdef(gd, "tf1", fetches=["train", "loss:0"])
        inits = {"v/Initializer/random_uniform", "v/Assign", "init"}
        assert not inits & set(session.index) and inits & set(function.index)
        assert {"mm", "loss"} <= set(session.index) and session.meta["prune_rule"] == "session"  # train: a NoOp, folded
        assert any(op.op == "ResourceApplyGradientDescent" for op in session)
        assert set(session.index) < set(function.index) and function.meta["prune_rule"] == "function"

    def test_a_function_step_is_the_same_under_the_session_rule(self, conv_step, conv_step_graph):
        """tf.function's outputs wait on every stateful op, so its outputs' needs hold the updates: the
        session rule drops nothing a Keras step runs (a GraphDef of one, fetched by its outputs, is right)."""
        outputs = conv_step_graph.meta["outputs"]
        g = from_graphdef(conv_step.graph_def(), "step", fetches=outputs, session=True)
        assert _graph_dict(g) == _graph_dict(conv_step_graph)

    def test_a_fetch_that_names_no_node_is_one_clear_error(self, conv_step):
        with pytest.raises(ModelImportError, match=r"fetch 'nope' names no node of the graph \(and 1 more\)"):
            from_graphdef(conv_step.graph_def(), "step", fetches=["Identity", "nope", "nope2"])


def _placeholder_graph(shape):
    """x: Placeholder(shape) -> MatMul with a [3, 2] constant -> Relu (TF1-style graph)."""
    import tensorflow as tf

    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, shape, name="x")
        w = tf.constant([[1.0, 2.0]] * 3, name="w")
        tf.nn.relu(tf.matmul(x, w, name="mm"), name="out")
    return g.as_graph_def()


@pytest.fixture(scope="module")
def nested():
    """outer(x) = 2 * inner(x), inner(x) = relu(x @ w): a call of a nested tf.function."""
    import tensorflow as tf

    w = tf.Variable(tf.ones([3, 2]))

    @tf.function
    def inner(x):
        return tf.nn.relu(tf.matmul(x, w))

    @tf.function
    def outer(x):
        return inner(x) * 2.0

    return outer, [tf.TensorSpec([4, 3])]


class TestNestedFunctions:
    def test_calls_are_inlined_and_counted(self, nested):
        g = from_tf_function(nested[0], nested[1], "nested")
        assert g.meta["inlined_function_calls"] == 1
        assert "function_call_ops" not in g.meta and g.meta["flops_fallback"] == {}
        mm = next(op for op in g if op.op == "MatMul")
        assert mm.flops == 2 * 4 * 3 * 2 and mm.output_shapes == [[4, 2]]
        assert "mul" in g.index  # nodes outside the function keep their names

    def test_file_of_nested_function_reimports_the_same(self, tmp_path, nested):
        import tensorflow as tf

        fn, sig = nested
        cf = fn.get_concrete_function(*sig)
        tf.io.write_graph(cf.graph.as_graph_def(add_shapes=True), str(tmp_path), "n.pb", as_text=False)
        again = import_file(tmp_path / "n.pb")
        assert _graph_dict(again) == _graph_dict(from_tf_function(cf, sig, "n"))
        var = next(op for op in again if op.param_bytes == 3 * 2 * 4)
        assert var.colocation is not None


class TestShapes:
    def test_batch_fills_the_unknown_dimension(self):
        g = from_graphdef(_placeholder_graph([None, 3]), "tiny", batch_size=7)
        assert g["mm"].output_shapes == [[7, 2]]
        assert g["mm"].flops == 2 * 7 * 3 * 2
        assert g["mm"].param_bytes == 3 * 2 * 4  # the folded constant lives with its consumer
        assert g.meta["inputs"] == [{"name": "x", "shape": [7, 3], "dtype": "float32"}]

    def test_input_shapes_override(self):
        g = from_graphdef(_placeholder_graph([None, 3]), "tiny", input_shapes={"x": [5, 3]})
        assert g["out"].output_shapes == [[5, 2]]

    def test_unknown_batch_is_one_clear_error(self):
        with pytest.raises(ModelImportError, match=r"placeholder 'x' has unknown shape \[\?, 3\]; give the batch "
                                                   r"size \(--batch\) or its shape \(--input-shape x=D1,D2,...\)"):
            from_graphdef(_placeholder_graph([None, 3]), "tiny")

    def test_unknown_rank_is_an_error_unless_allowed(self):
        with pytest.raises(ModelImportError, match="unknown rank"):
            from_graphdef(_placeholder_graph(None), "tiny")
        g = from_graphdef(_placeholder_graph(None), "tiny", allow_unknown_shapes=True)
        assert "mm" in g.meta["unknown_shape_ops"]

    def test_variables_without_recorded_shapes_name_add_shapes(self, conv_step):
        """A GraphDef written by plain ``as_graph_def()`` (as users do) has no shapes for its captured variables:
        the error says how to write it, not to give --batch, which cannot help."""
        plain = conv_step.concrete_function().graph.as_graph_def()
        with pytest.raises(ModelImportError, match=r"ReadVariableOp.*as_graph_def\(add_shapes=True\)") as e:
            from_graphdef(plain, "plain", batch_size=BATCH)
        assert "--batch" not in str(e.value)

    def test_shape_for_missing_node(self):
        with pytest.raises(ModelImportError, match="'nope'"):
            from_graphdef(_placeholder_graph([None, 3]), "tiny", input_shapes={"nope": [1]})


class TestColocation:
    def test_class_attribute_is_honoured(self):
        import tensorflow as tf

        gd = _placeholder_graph([2, 3])
        out = next(n for n in gd.node if n.name == "out")
        out.attr["_class"].list.s.append(b"loc:@mm")
        g = from_graphdef(gd, "tiny")
        assert g["out"].colocation == g["mm"].colocation is not None
        assert g["x"].colocation is None
        del tf

    def test_tf1_variables(self):
        import tensorflow as tf

        g = tf.Graph()
        with g.as_default():
            x = tf.compat.v1.placeholder(tf.float32, [4, 3], name="x")
            v = tf.compat.v1.get_variable("v", [3, 2], use_resource=True)
            y = tf.matmul(x, v, name="mm")
            tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(y))
        og = from_graphdef(g.as_graph_def(), "tf1")
        assert og["v"].param_bytes == 3 * 2 * 4
        group = {op.name for op in og if op.colocation == "v"}
        assert "v" in group and any(og[n].op == "ResourceApplyGradientDescent" for n in group)
        apply = next(og[n] for n in group if og[n].op == "ResourceApplyGradientDescent")
        assert apply.flops == 2 * 3 * 2


    def test_tf1_reference_variables(self):
        import tensorflow as tf

        g = tf.Graph()
        with g.as_default():
            x = tf.compat.v1.placeholder(tf.float32, [4, 3], name="x")
            v = tf.compat.v1.get_variable("w", [3, 2], use_resource=False)
            tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(tf.matmul(x, v)))
        og = from_graphdef(g.as_graph_def(), "tf1ref")
        assert og["w"].op == "VariableV2" and og["w"].param_bytes == 3 * 2 * 4
        group = {op.name for op in og if op.colocation == "w"}
        assert {"w", "w/read"} <= group and any(og[n].op == "ApplyGradientDescent" for n in group)


class TestErrors:
    def test_truncated_protobuf(self, tmp_path, conv_step):
        raw = conv_step.graph_def().SerializeToString()
        (tmp_path / "cut.pb").write_bytes(raw[: len(raw) // 2 + 3])
        with pytest.raises(ModelImportError, match="cut.pb"):
            import_file(tmp_path / "cut.pb")

    def test_corrupt_protobuf(self, tmp_path):
        (tmp_path / "bad.pb").write_bytes(b"\x0a\xff\xff\xff\xff\x0f garbage")
        with pytest.raises(ModelImportError, match="corrupt or truncated"):
            import_file(tmp_path / "bad.pb")

    def test_not_a_model_file(self, tmp_path):
        (tmp_path / "x.pb").write_bytes(b"\x89PNG\r\n\x1a\n")
        with pytest.raises(ModelImportError, match="not a recognised model file"):
            import_file(tmp_path / "x.pb")

    def test_empty_and_missing(self, tmp_path):
        (tmp_path / "e.pb").write_bytes(b"")
        with pytest.raises(ModelImportError, match="empty file"):
            import_file(tmp_path / "e.pb")
        with pytest.raises(ModelImportError, match="no such file"):
            import_file(tmp_path / "missing.pb")

    def test_bad_text_graphdef(self, tmp_path):
        (tmp_path / "g.pbtxt").write_text("node { name: 'a' op: 'Const' bogus_field: 3 }")
        with pytest.raises(ModelImportError, match="not a valid text GraphDef"):
            import_file(tmp_path / "g.pbtxt")

    def test_unknown_op_type(self, tmp_path):
        """The error names the node and stays short (TF's own says neither, in 450 characters)."""
        (tmp_path / "g.pbtxt").write_text('node { name: "a" op: "NoSuchOpAnywhere" }')
        with pytest.raises(ModelImportError, match="node 'a': op type 'NoSuchOpAnywhere' is unknown") as info:
            import_file(tmp_path / "g.pbtxt")
        assert len(str(info.value)) < 200

    def test_a_cycle_is_named(self, tmp_path):
        """TF says "3 nodes in a cycle" (it counts 'c', downstream of it, too); the error names the cycle's nodes."""
        t = 'attr { key: "T" value { type: DT_FLOAT } }'
        (tmp_path / "g.pbtxt").write_text(
            'node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }\n'
            f'node {{ name: "a" op: "AddV2" input: "x" input: "b" {t} }}\n'
            f'node {{ name: "b" op: "Relu" input: "a" {t} }}\nnode {{ name: "c" op: "Relu" input: "b" {t} }}\n')
        with pytest.raises(ModelImportError, match=r"node '[ab]': is on a cycle \('[ab]' -> '[ab]' -> '[ab]'\)"):
            import_file(tmp_path / "g.pbtxt")

    def test_dangling_input(self, tmp_path):
        (tmp_path / "g.pbtxt").write_text('node { name: "a" op: "Identity" input: "ghost" attr { key: "T" value { type: DT_FLOAT } } }')
        with pytest.raises(ModelImportError, match="ghost"):
            import_file(tmp_path / "g.pbtxt")

    def test_op_without_flop_rule_uses_fallback_and_is_counted(self):
        import tensorflow as tf

        g = tf.Graph()
        with g.as_default():
            x = tf.compat.v1.placeholder(tf.float32, [4, 5, 5], name="x")
            tf.linalg.inv(x, name="inv")
        og = from_graphdef(g.as_graph_def(), "inv")
        assert og["inv"].flops == 4 * 5 * 5
        assert og.meta["flops_fallback"] == {"MatrixInverse": 1}


def test_with_variable_shapes_gives_tf_the_shapes_of_captured_variables(conv_step):
    import tensorflow as tf

    from placer.importers.shapes import with_variable_shapes

    shaped = with_variable_shapes(conv_step.graph_def())
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(shaped, name="")
    conv = next(op for op in graph.get_operations() if op.type == "Conv2D")
    assert conv.outputs[0].shape.as_list() == [BATCH, 6, 6, 5]
    assert conv.inputs[1].shape.as_list() == [3, 3, 3, 5]
