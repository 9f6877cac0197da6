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


X3_SHAPE = [2, 5, 9, 9, 4]  # pooled by a 3x3x3 window, stride 2, VALID: [2, 2, 4, 4, 4]
POOL_FLOPS = 9 * 2 * 4 * 4 * 4
POOL3_FLOPS = 27 * 2 * 2 * 4 * 4 * 4


def _second_gradient_step(pool_type: str):
    """GraphDef of the gradient of sum(dx**2), where dx is the gradient of sum(pool(x)**2): a pool, its
    gradient, and the gradient of that (MaxPoolGradGrad(V2), MaxPool3DGradGrad, or AvgPool3D again)."""
    import tensorflow as tf

    pools = {
        "MaxPool": lambda x: tf.raw_ops.MaxPool(input=x, ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1],
                                                padding="VALID"),
        "MaxPoolV2": lambda x: tf.raw_ops.MaxPoolV2(input=x, ksize=tf.constant([1, 3, 3, 1]),
                                                    strides=tf.constant([1, 2, 2, 1]), padding="VALID"),
        "MaxPool3D": lambda x: tf.raw_ops.MaxPool3D(input=x, ksize=[1, 3, 3, 3, 1], strides=[1, 2, 2, 2, 1],
                                                    padding="VALID"),
        "AvgPool3D": lambda x: tf.raw_ops.AvgPool3D(input=x, ksize=[1, 3, 3, 3, 1], strides=[1, 2, 2, 2, 1],
                                                    padding="VALID"),
    }
    pool = pools[pool_type]

    @tf.function
    def step(x):
        with tf.GradientTape() as outer:
            outer.watch(x)
            with tf.GradientTape() as inner:
                inner.watch(x)
                y = pool(x)
                total = tf.reduce_sum(y * y)
            dx = inner.gradient(total, x)
            penalty = tf.reduce_sum(dx * dx)
        return outer.gradient(penalty, x)

    shape = X3_SHAPE if pool_type.endswith("3D") else X_SHAPE
    return step.get_concrete_function(tf.TensorSpec(shape, tf.float32)).graph.as_graph_def(add_shapes=True)


class TestSecondGradientsOfPools:
    @pytest.mark.parametrize("pool_type, expected", [
        ("MaxPool", {"MaxPool": POOL_FLOPS, "MaxPoolGrad": POOL_FLOPS, "MaxPoolGradGrad": POOL_FLOPS}),
        ("MaxPoolV2", {"MaxPoolV2": POOL_FLOPS, "MaxPoolGradV2": POOL_FLOPS, "MaxPoolGradGradV2": POOL_FLOPS}),
        ("MaxPool3D", {"MaxPool3D": POOL3_FLOPS, "MaxPool3DGrad": POOL3_FLOPS, "MaxPool3DGradGrad": POOL3_FLOPS}),
        ("AvgPool3D", {"AvgPool3D": POOL3_FLOPS, "AvgPool3DGrad": POOL3_FLOPS}),
    ])
    def test_every_pool_op_counts_its_window_per_pooled_element(self, pool_type, expected):
        """Each pool, gradient and second gradient is window x pooled elements, and nothing falls back."""
        g = from_graphdef(_second_gradient_step(pool_type), pool_type)
        assert g.meta["flops_fallback"] == {}
        counted = {(op.op, op.flops) for op in g if op.op in expected}
        assert counted == set(expected.items())

    def test_argmax_pool_its_gradient_and_second_gradient(self):
        """MaxPoolWithArgmax searches the window; its gradient adds each gradient element once at its
        argmax; MaxPoolGradGradWithArgmax (no Python gradient reaches it: built as a raw op) gathers."""
        import tensorflow as tf

        @tf.function
        def step(x):
            kw = dict(ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding="VALID")
            with tf.GradientTape() as tape:
                tape.watch(x)
                y, argmax = tf.raw_ops.MaxPoolWithArgmax(input=x, **kw)
                total = tf.reduce_sum(y * y)
            dx = tape.gradient(total, x)
            return dx, tf.raw_ops.MaxPoolGradGradWithArgmax(input=x, grad=dx, argmax=argmax, **kw)

        cf = step.get_concrete_function(tf.TensorSpec(X_SHAPE, tf.float32))
        g = from_graphdef(cf.graph.as_graph_def(add_shapes=True), "argmax")
        assert g.meta["flops_fallback"] == {}
        counted = {op.op: op.flops for op in g if "Argmax" in op.op}
        assert counted == {"MaxPoolWithArgmax": POOL_FLOPS, "MaxPoolGradWithArgmax": 2 * 4 * 4 * 4,
                           "MaxPoolGradGradWithArgmax": 0}
