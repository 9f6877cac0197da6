"""Small Keras models imported end to end as training steps."""

from __future__ import annotations

from collections import Counter

import pytest

from placer.errors import ModelImportError
from placer.importers import keras_step
from tests.placer.importers.conftest import BATCH


def _tf_counts(model, **kw):
    step = keras_step(model, BATCH, **kw)
    return Counter(n.op for n in step.graph_def().node)


class TestDense:
    def test_matmul_flops_are_the_hand_formula(self, dense_graph):
        """Forward Dense(8) on [B, 16]: 2*B*16*8; its two gradient matmuls the same."""
        fwd = dense_graph["mlp_1/hidden_1/MatMul"]
        assert fwd.output_shapes == [[BATCH, 8]]
        assert fwd.flops == 2 * BATCH * 16 * 8
        grads = [op for op in dense_graph if op.op == "MatMul" and op.name.startswith("gradient_tape/mlp_1/hidden")]
        assert sorted(op.flops for op in grads) == [2 * BATCH * 16 * 8]  # dX of the first layer is not needed
        head = [op for op in dense_graph if op.op == "MatMul" and "head" in op.name]
        assert sorted(op.flops for op in head) == [2 * BATCH * 8 * 4] * 3

    def test_op_count_equals_tf_after_folding(self, dense_model, dense_graph):
        counts = _tf_counts(dense_model)
        m = dense_graph.meta
        left = counts - Counter(m["pruned"])  # what TF runs of the step
        assert m["pruned"] and m["tf_node_count"] == sum(counts.values())
        assert m["folded"] == {"Const": left["Const"], "NoOp": left["NoOp"]}
        assert len(dense_graph) == sum(left.values()) - left["Const"] - left["NoOp"]
        assert Counter(op.op for op in dense_graph) == left - Counter({"Const": left["Const"], "NoOp": left["NoOp"]})

    def test_weights_shapes_and_bytes(self, dense_graph):
        m = dense_graph.meta
        variables = [c for c in m["captures"] if c["kind"] == "variable"]
        paths = {c["variable"] for c in variables}
        assert {"hidden/kernel", "hidden/bias", "head/kernel", "head/bias"} <= paths
        kernel = next(c for c in variables if c["variable"] == "hidden/kernel")
        assert dense_graph[kernel["placeholder"]].param_bytes == 16 * 8 * 4
        # model weights + SGD momentum slots (same sizes) + learning rate (float32) and iteration (int64)
        weights = (16 * 8 + 8 + 8 * 4 + 4) * 4
        assert m["variable_bytes"] == 2 * weights + 4 + 8
        for op in dense_graph:
            assert op.output_bytes >= 0 and all(d >= 0 for s in op.output_shapes for d in s)
        relu = dense_graph["mlp_1/hidden_1/Relu"]
        assert relu.output_bytes == BATCH * 8 * 4 and relu.flops == BATCH * 8

    def test_each_variable_colocated_with_its_reads_and_updates(self, dense_graph):
        kernel = next(c["placeholder"] for c in dense_graph.meta["captures"] if c.get("variable") == "hidden/kernel")
        group = {op.name for op in dense_graph if op.colocation == kernel}
        assert kernel in group
        users = {op.name for op in dense_graph if kernel in op.inputs}
        assert users and users <= group
        types = {dense_graph[n].op for n in group}
        assert {"Placeholder", "ReadVariableOp"} <= types
        assert any(t.startswith("Assign") for t in types)  # the optimizer's update

    def test_cost_left_empty_for_the_roofline(self, dense_graph):
        assert all(not op.cost for op in dense_graph)
        assert dense_graph.meta["flops_fallback_ops"] == 0

    def test_meta_records_what_is_needed_to_run_it(self, dense_graph):
        m = dense_graph.meta
        assert m["keras_model"] == "mlp" and m["batch_size"] == BATCH and m["training"] is True
        assert [i["name"] for i in m["inputs"]] == ["x", "y"]
        assert m["inputs"][0]["shape"] == [BATCH, 16]
        assert m["outputs"] and all(o in dense_graph.index for o in m["outputs"])
        assert m["control_outputs"]
        assert m["total_flops"] == pytest.approx(sum(op.flops for op in dense_graph))

    def test_inference_only(self, dense_model):
        from placer.importers import from_keras

        g = from_keras(dense_model, BATCH, training=False)
        assert g.meta["training"] is False
        assert not any(op.name.startswith("gradient_tape") for op in g)
        assert g.meta["contraction_flops"] == 2 * BATCH * (16 * 8 + 8 * 4)


class TestConv:
    def test_conv_and_gradient_flops(self, conv_model, conv_graph):
        """Conv2D 3x3x3->5 on 8x8 (valid, 6x6 out): 2 * B*6*6 * 3*3*3*5, forward and both gradients.

        The gradient with respect to the input batch is computed by TF's Conv2D gradient but read by
        nothing, so the step TF runs (the default import) leaves it out; with every node kept it is there."""
        from placer.importers import from_keras

        expected = 2 * BATCH * 6 * 6 * 3 * 3 * 3 * 5
        assert not any(op.op == "Conv2DBackpropInput" for op in conv_graph)
        assert conv_graph.meta["pruned"]["Conv2DBackpropInput"] == 1
        convs = {op.op: op for op in from_keras(conv_model, BATCH, prune=False) if op.op.startswith("Conv2D")}
        assert {op.op: op.flops for op in conv_graph if op.op.startswith("Conv2D")} == {
            "Conv2D": expected, "Conv2DBackpropFilter": expected}
        assert convs["Conv2D"].output_shapes == [[BATCH, 6, 6, 5]]
        assert convs["Conv2D"].flops == expected
        assert convs["Conv2DBackpropFilter"].flops == expected
        assert convs["Conv2DBackpropInput"].flops == expected
        assert convs["Conv2DBackpropInput"].output_shapes == [[BATCH, 8, 8, 3]]

    def test_dense_after_flatten(self, conv_graph):
        mm = next(op for op in conv_graph if op.op == "MatMul" and op.name.endswith("head_1/MatMul"))
        assert mm.flops == 2 * BATCH * (6 * 6 * 5) * 2


class TestLSTM:
    def test_unrolled_lstm_imports_with_rules_for_every_op(self, lstm_graph):
        types = Counter(op.op for op in lstm_graph)
        assert types["MatMul"] >= 6 * 2  # per step: input and recurrent kernels, forward
        assert types["Sigmoid"] >= 6 * 3 and types["Tanh"] >= 6 * 2
        assert lstm_graph.meta["flops_fallback_ops"] == 0
        assert not any(op.op in ("While", "StatelessWhile") for op in lstm_graph)

    def test_step_matmuls_match_the_formula(self, lstm_graph):
        mm = [op for op in lstm_graph if op.op == "MatMul" and not op.name.startswith("gradient_tape")
              and "lstm" in op.name]
        flops = Counter(op.flops for op in mm)
        assert flops[2 * BATCH * 8 * 48] == 6  # x_t @ W, W: [8, 4*12]
        assert flops[2 * BATCH * 12 * 48] >= 5  # h_{t-1} @ U (step 0 may be folded with zeros)


class TestErrors:
    def test_bad_batch(self, dense_model):
        from placer.importers import from_keras

        with pytest.raises(ModelImportError, match="batch size"):
            from_keras(dense_model, 0)

    def test_unknown_application(self):
        from placer.importers import keras_application

        with pytest.raises(ModelImportError, match="unknown Keras application 'resnet5000'"):
            keras_application("resnet5000", 2)

    def test_unknown_optimizer(self, dense_model):
        from placer.importers import from_keras

        with pytest.raises(ModelImportError, match="optimizer"):
            from_keras(dense_model, 2, optimizer="no-such-optimizer")


class TestControlDependencies:
    def test_only_output_free_producers_become_control_edges(self, dense_graph):
        """The step's output Identity waits on every variable read in TF; those are not data edges here."""
        out = dense_graph[dense_graph.meta["outputs"][0]]
        carrying = [i for i in out.inputs if dense_graph[i].output_bytes > 0]
        assert len(carrying) == 1  # the loss, its one data input
        assert dense_graph.meta["control_edges_dropped"] > 0
        assert dense_graph.meta["control_edges"] > 0  # e.g. on assigns, which output nothing


class TestOptimizerUpdate:
    def test_in_place_weight_update_counts_one_flop_per_weight(self, dense_graph):
        """SGD with momentum ends with ``kernel += m`` (AssignAddVariableOp): 16*8 FLOPs for hidden/kernel."""
        kernel = next(c["placeholder"] for c in dense_graph.meta["captures"] if c.get("variable") == "hidden/kernel")
        adds = [op for op in dense_graph if op.op == "AssignAddVariableOp" and kernel in op.inputs]
        assert len(adds) == 1
        assert adds[0].flops == 16 * 8
