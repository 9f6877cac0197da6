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
