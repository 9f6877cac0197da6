"""FLOP rules against hand formulas."""

from __future__ import annotations

from placer.importers.flops import OpInfo, op_flops


def flops(type_, inputs, outputs, **attrs):
    value, fell_back = op_flops(OpInfo(type_, attrs, inputs, outputs))
    assert not fell_back
    return value


def test_matmul_and_transposes():
    assert flops("MatMul", [[32, 16], [16, 8]], [[32, 8]]) == 2 * 32 * 16 * 8
    assert flops("MatMul", [[16, 32], [16, 8]], [[32, 8]], transpose_a=True) == 2 * 32 * 16 * 8


def test_batch_matmul():
    assert flops("BatchMatMulV2", [[4, 10, 64], [4, 64, 10]], [[4, 10, 10]]) == 2 * 4 * 10 * 10 * 64
    assert flops("BatchMatMulV2", [[4, 64, 10], [4, 64, 10]], [[4, 10, 10]], adj_x=True) == 2 * 4 * 10 * 10 * 64


def test_einsum_contraction_and_ellipsis():
    assert flops("Einsum", [[8, 20, 64], [64, 4, 16]], [[8, 20, 4, 16]], equation="abc,cde->abde") == 2 * 8 * 20 * 64 * 4 * 16
    assert flops("Einsum", [[8, 20, 64], [64, 32]], [[8, 20, 32]], equation="...c,cd->...d") == 2 * 8 * 20 * 64 * 32


def test_conv_nhwc_and_nchw():
    nhwc = flops("Conv2D", [[2, 9, 9, 3], [3, 3, 3, 8]], [[2, 7, 7, 8]])
    assert nhwc == 2 * 2 * 7 * 7 * 8 * 3 * 3 * 3
    nchw = flops("Conv2D", [[2, 3, 9, 9], [3, 3, 3, 8]], [[2, 8, 7, 7]], data_format="NCHW")
    assert nchw == nhwc


def test_conv_gradients_equal_forward():
    fwd = 2 * 2 * 7 * 7 * 8 * 3 * 3 * 3
    assert flops("Conv2DBackpropInput", [[4], [3, 3, 3, 8], [2, 7, 7, 8]], [[2, 9, 9, 3]]) == fwd
    assert flops("Conv2DBackpropFilter", [[2, 9, 9, 3], [4], [2, 7, 7, 8]], [[3, 3, 3, 8]]) == fwd


def test_elementwise_reductions_softmax():
    assert flops("AddV2", [[4, 5], [5]], [[4, 5]]) == 20
    assert flops("Tanh", [[4, 5]], [[4, 5]]) == 80
    assert flops("Sum", [[4, 5], [1]], [[4]]) == 20
    assert flops("Softmax", [[4, 5]], [[4, 5]]) == 100
    assert flops("AddN", [[3], [3], [3]], [[3]]) == 6
    assert flops("Reshape", [[4, 5], [2]], [[20]]) == 0


def test_lstm_block_cell():
    # x [B, I], cs_prev [B, H], h_prev [B, H], w [I+H, 4H]
    b, i, h = 8, 10, 16
    got = flops("LSTMBlockCell", [[b, i], [b, h], [b, h], [i + h, 4 * h], [h], [h], [h], [4 * h]], [[b, h]] * 7)
    assert got == 2 * b * (i + h) * 4 * h + 16 * b * h


def test_unknown_type_falls_back_to_output_elements():
    assert op_flops(OpInfo("FancyNewOp", {}, [[3]], [[4, 5], [2]])) == (22.0, True)


def test_broken_shapes_fall_back_instead_of_crashing():
    assert op_flops(OpInfo("MatMul", {}, [], [[4, 5]])) == (20.0, True)


def test_sparse_embedding_update_counts_updated_elements():
    # resource, indices [B*T], updates [B*T, D]
    assert flops("ResourceScatterSub", [[], [12], [12, 8]], []) == 12 * 8


def test_resource_variable_updates_count_the_value():
    """``var += value`` is one FLOP per element of value; resource assigns output nothing, so the count
    must come from the value input (resource handle, value [16, 8]), not the outputs."""
    assert flops("AssignAddVariableOp", [[], [16, 8]], []) == 16 * 8
    assert flops("AssignSubVariableOp", [[], [16, 8]], []) == 16 * 8
    assert flops("AssignSub", [[16, 8], [16, 8]], [[16, 8]]) == 16 * 8  # TF1 ref variable: same count


def test_gru_block_cell_and_its_gradient():
    """Forward: [x, h] @ W_ru ([I+H, 2H]) and [x, r*h] @ W_c ([I+H, H]), plus gate arithmetic.
    The gradient op does the two matmuls back to dx and dh_prev (2*B*(I+H)*3H); TF's Python gradient
    computes dW_ru and dW_c with separate MatMul ops, so they are not the op's."""
    b, i, h = 8, 10, 16
    x, h_prev, w_ru, w_c, b_ru, b_c = [b, i], [b, h], [i + h, 2 * h], [i + h, h], [2 * h], [h]
    assert flops("GRUBlockCell", [x, h_prev, w_ru, w_c, b_ru, b_c], [[b, h]] * 4) == 2 * b * (i + h) * 3 * h + 10 * b * h
    # inputs: x, h_prev, w_ru, w_c, b_ru, b_c, r, u, c, d_h
    grad_in = [x, h_prev, w_ru, w_c, b_ru, b_c, [b, h], [b, h], [b, h], [b, h]]
    got = flops("GRUBlockCellGrad", grad_in, [x, h_prev, [b, 2 * h], [b, h]])
    assert got == 2 * b * (i + h) * 3 * h + 16 * b * h


# MaxPool's window is an attribute; MaxPoolV2 and MaxPoolGradV2 take it as a tensor (input 1, input 3)
POOL_IN, POOL_OUT = [2, 9, 9, 4], [2, 4, 4, 4]  # 3x3 window, stride 2, VALID
KSIZE, STRIDES = [1, 3, 3, 1], [1, 2, 2, 1]


def test_max_pool_v2_reads_its_window_from_the_constant_input():
    """MaxPoolV2 with a constant 3x3 window counts like MaxPool: 9 per output element."""
    v1 = flops("MaxPool", [POOL_IN], [POOL_OUT], ksize=KSIZE)
    v2 = op_flops(OpInfo("MaxPoolV2", {}, [POOL_IN, [4], [4]], [POOL_OUT], [None, KSIZE, STRIDES]))
    assert v1 == 9 * 2 * 4 * 4 * 4
    assert v2 == (v1, False)


def test_max_pool_grad_v2_counts_the_gradient_input_not_the_strides():
    """Inputs orig_input, orig_output, grad, ksize, strides: window x grad elements, as MaxPoolGrad."""
    v1 = flops("MaxPoolGrad", [POOL_IN, POOL_OUT, POOL_OUT], [POOL_IN], ksize=KSIZE)
    v2 = op_flops(OpInfo("MaxPoolGradV2", {}, [POOL_IN, POOL_OUT, POOL_OUT, [4], [4]], [POOL_IN],
                         [None, None, None, KSIZE, STRIDES]))
    assert v1 == 9 * 2 * 4 * 4 * 4
    assert v2 == (v1, False)


def test_pool_v2_without_a_constant_window_falls_back():
    """A window that is no known constant is reported as a fallback, not counted as a window of 1."""
    assert op_flops(OpInfo("MaxPoolV2", {}, [POOL_IN, [4], [4]], [POOL_OUT])) == (128.0, True)
    info = OpInfo("MaxPoolGradV2", {}, [POOL_IN, POOL_OUT, POOL_OUT, [4], [4]], [POOL_IN], [None] * 5)
    assert op_flops(info) == (2 * 9 * 9 * 4, True)


def test_max_pool_grad_grad_searches_the_window_per_pooled_element():
    """Inputs orig_input, orig_output, grad (orig_input's shape); the output has the pooled shape and
    each element searches its window for the max again: window x pooled elements, as MaxPool."""
    assert flops("MaxPoolGradGrad", [POOL_IN, POOL_OUT, POOL_IN], [POOL_OUT], ksize=KSIZE) == 9 * 2 * 4 * 4 * 4


def test_max_pool_grad_grad_v2_reads_its_window_from_the_constant_input():
    """MaxPoolGradGradV2 (window and strides as inputs 3 and 4) counts like MaxPoolGradGrad, and falls
    back, reported, when the window is no known constant."""
    inputs = [POOL_IN, POOL_OUT, POOL_IN, [4], [4]]
    v2 = op_flops(OpInfo("MaxPoolGradGradV2", {}, inputs, [POOL_OUT], [None, None, None, KSIZE, STRIDES]))
    assert v2 == (9 * 2 * 4 * 4 * 4, False)
    assert op_flops(OpInfo("MaxPoolGradGradV2", {}, inputs, [POOL_OUT], [None] * 5)) == (2 * 4 * 4 * 4, True)


# 3-D pools: a 3x3x3 window, stride 2, VALID
POOL3_IN, POOL3_OUT, KSIZE3 = [2, 5, 9, 9, 4], [2, 2, 4, 4, 4], [1, 3, 3, 3, 1]
POOL3_FLOPS = 27 * 2 * 2 * 4 * 4 * 4


def test_3d_pool_gradients_count_the_window_per_gradient_element():
    """MaxPool3DGrad (orig_input, orig_output, grad) and AvgPool3DGrad (orig_input_shape, grad): window x
    grad elements, as their 2-D versions and as the forward pools."""
    assert flops("MaxPool3D", [POOL3_IN], [POOL3_OUT], ksize=KSIZE3) == POOL3_FLOPS
    assert flops("MaxPool3DGrad", [POOL3_IN, POOL3_OUT, POOL3_OUT], [POOL3_IN], ksize=KSIZE3) == POOL3_FLOPS
    assert flops("AvgPool3DGrad", [[5], POOL3_OUT], [POOL3_IN], ksize=KSIZE3) == POOL3_FLOPS


def test_max_pool_3d_grad_grad_searches_the_window_per_pooled_element():
    """Inputs orig_input, orig_output, grad (orig_input's shape); output pooled: window x its elements."""
    assert flops("MaxPool3DGradGrad", [POOL3_IN, POOL3_OUT, POOL3_IN], [POOL3_OUT], ksize=KSIZE3) == POOL3_FLOPS


def test_max_pool_with_argmax_counts_like_max_pool():
    """Window x pooled elements; the second output (the argmax) is found in the same search."""
    assert flops("MaxPoolWithArgmax", [POOL_IN], [POOL_OUT, POOL_OUT], ksize=KSIZE) == 9 * 2 * 4 * 4 * 4


def test_max_pool_grad_with_argmax_adds_each_gradient_element_once():
    """Inputs input, grad, argmax (both pooled): no window search, one add per grad element."""
    assert flops("MaxPoolGradWithArgmax", [POOL_IN, POOL_OUT, POOL_OUT], [POOL_IN], ksize=KSIZE) == 2 * 4 * 4 * 4


def test_max_pool_grad_grad_with_argmax_is_a_gather():
    """Inputs input, grad (input's shape), argmax (pooled): output[i] = grad[argmax[i]], 0 FLOPs as Gather."""
    assert flops("MaxPoolGradGradWithArgmax", [POOL_IN, POOL_IN, POOL_OUT], [POOL_OUT], ksize=KSIZE) == 0
