"""Importer FLOPs of ops TF hides from a plain reading: windows given as tensors, XLA-compiled calls."""

from __future__ import annotations

import pytest

from placer.importers import from_graphdef, from_keras

X_SHAPE = [2, 9, 9, 4]  # pooled by a 3x3 window, stride 2, VALID: [2, 4, 4, 4]


def _pool_step(v2: bool):
    """GraphDef of x -> max pool -> sum, and the gradient back to x (MaxPoolGrad(V2))."""
    import tensorflow as tf

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            if v2:
                y = tf.raw_ops.MaxPoolV2(input=x, ksize=tf.constant([1, 3, 3, 1]),
                                         strides=tf.constant([1, 2, 2, 1]), padding="VALID")
            else:
                y = tf.raw_ops.MaxPool(input=x, ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding="VALID")
            total = tf.reduce_sum(y)
        return tape.gradient(total, x)

    return step.get_concrete_function(tf.TensorSpec(X_SHAPE, tf.float32)).graph.as_graph_def(add_shapes=True)


class TestPoolWindowAsTensor:
    def test_max_pool_v2_counts_like_max_pool(self):
        """MaxPoolV2 and MaxPoolGradV2 read their window from its Const input: 9 per output element."""
        v1 = {op.op: op.flops for op in from_graphdef(_pool_step(False), "v1")}
        g = from_graphdef(_pool_step(True), "v2")
        v2 = {op.op: op.flops for op in g}
        assert v2["MaxPoolV2"] == v1["MaxPool"] == 9 * 2 * 4 * 4 * 4
        assert v2["MaxPoolGradV2"] == v1["MaxPoolGrad"] == 9 * 2 * 4 * 4 * 4
        assert g.meta["flops_fallback"] == {}

    def test_a_window_that_is_no_constant_falls_back_and_is_reported(self):
        """A window computed in the graph is not read (only Const inputs are): the op is a listed fallback."""
        import tensorflow as tf

        @tf.function
        def step(x, k):
            return tf.raw_ops.MaxPoolV2(input=x, ksize=k, strides=[1, 2, 2, 1], padding="VALID")

        cf = step.get_concrete_function(tf.TensorSpec(X_SHAPE, tf.float32), tf.TensorSpec([4], tf.int32))
        g = from_graphdef(cf.graph.as_graph_def(add_shapes=True), "pool", input_shapes={"k": [4]},
                          allow_unknown_shapes=True)
        assert g.meta["flops_fallback"] == {"MaxPoolV2": 1}


N, H, W, CIN, COUT, K, GROUPS = 2, 8, 8, 4, 6, 3, 2
OUT_HW = H - K + 1
GROUPED_CONV_FLOPS = 2 * N * OUT_HW * OUT_HW * COUT * K * K * CIN // GROUPS


@pytest.fixture(scope="module")
def grouped_model(keras):
    """[8, 8, 4] -> Conv2D(6, 3x3, groups=2, no bias): Keras 3 runs it in a jit_compile tf.function."""
    inp = keras.Input((H, W, CIN))
    out = keras.layers.Conv2D(COUT, K, groups=GROUPS, use_bias=False, name="gconv")(inp)
    return keras.Model(inp, out, name="grouped")


class TestXlaCompiledCalls:
    def test_forward_grouped_conv_is_inlined_and_counted_by_hand(self, grouped_model):
        """2*N*H*W*Cout*kh*kw*Cin/groups, the whole forward pass; nothing falls back."""
        g = from_keras(grouped_model, N, training=False)
        assert g.meta["flops_fallback"] == {}
        assert g.meta["inlined_function_calls"] == 1 and "function_call_ops" not in g.meta
        assert [op.op for op in g if op.flops] == ["Conv2D"]
        assert g.meta["total_flops"] == g.meta["contraction_flops"] == GROUPED_CONV_FLOPS

    def test_training_step_counts_the_conv_and_its_gradients_by_hand(self, grouped_model):
        """The forward call and its gradient call (both XLA-marked) are inlined; each convolution in
        them (forward, filter gradient, input gradient) is the forward's count."""
        g = from_keras(grouped_model, N)
        assert g.meta["flops_fallback"] == {}
        assert not any(op.op in ("PartitionedCall", "StatefulPartitionedCall") for op in g)
        convs = [(op.op, op.flops) for op in g if op.op.startswith("Conv2D")]
        assert {"Conv2D", "Conv2DBackpropFilter"} <= {t for t, _ in convs}
        assert all(f == GROUPED_CONV_FLOPS for _, f in convs)
