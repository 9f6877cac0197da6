"""FLOPs of one execution of a TensorFlow op, from its type, attributes and shapes.

Unit: floating-point operations, counting a multiply-add as 2 (so a matmul
of ``[M, K] x [K, N]`` is ``2*M*N*K``). Rules cover the ops that dominate real
training steps:

- contractions: ``MatMul``, ``BatchMatMul*``, ``Einsum``, ``Conv2D``/``Conv3D``,
  ``DepthwiseConv2dNative`` and their input/filter gradients
  (``2 * filter size * output positions`` for each);
- batch-norm: fused ops, 8 FLOPs per element forward in training (mean,
  variance, normalise, scale, shift), 4 in inference, 10 for the gradient;
  Keras 3 builds batch-norm from element-wise ops and reductions, which have
  their own rules;
- element-wise ops: 1 FLOP per output element (add, mul, compare, select,
  ReLU...), `TRANSCENDENTAL` ones (exp, log, tanh, sigmoid, pow, sqrt, erf...)
  and their gradients 4; ``AddN`` ``n-1`` per element; ``Softmax``/``LogSoftmax``
  5 per element, softmax cross-entropy 6;
- reductions (``Sum``, ``Mean``, ``Max``, ``BiasAddGrad``...): 1 per input
  element; pooling (2-D and 3-D, max and average, their gradients and the max
  pools' second gradients): window size per pooled element (``MaxPoolV2``,
  ``MaxPoolGradV2`` and ``MaxPoolGradGradV2`` take their window as a tensor:
  its value must be given in `OpInfo.input_values`, else they fall back); the
  argmax variants' gradients read the argmax instead of searching the window:
  1 per pooled element (``MaxPoolGradWithArgmax``), 0 for the gather that is
  ``MaxPoolGradGradWithArgmax``;
- LSTM/GRU cell ops (``LSTMBlockCell``, ``BlockLSTM``, ``GRUBlockCell`` and
  gradients): their matmuls plus the gate arithmetic; optimizer apply ops
  (``ResourceApplyAdam``...): a fixed count per weight; in-place variable
  updates (``AssignAddVariableOp``, ``AssignSubVariableOp``, as Keras 3
  optimizers apply their steps) and sparse scatter updates
  (``ResourceScatterSub``, embedding gradients): 1 per updated element;
- data movement and bookkeeping (``Identity``, ``Reshape``, ``ConcatV2``,
  ``Transpose``, ``Gather``, ``ReadVariableOp``, ``Const``...): 0; their time
  comes from bytes moved in the roofline.

Any other op type falls back to 1 FLOP per output element; `op_flops`
reports when it did so the importer can count fallbacks in the graph's meta.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

Shape = list[int]


@dataclass
class OpInfo:
    """What a FLOP rule may look at: type, attributes, static shapes and small constant inputs."""

    type: str
    attrs: dict[str, Any] = field(default_factory=dict)
    inputs: list[Shape] = field(default_factory=list)   # data inputs only, in order
    outputs: list[Shape] = field(default_factory=list)
    input_values: list[Any] = field(default_factory=list)
    """Value of each data input that is a small constant (nested lists, as ``ndarray.tolist()``),
    None for the others; may be empty. Rules read windows given as tensors from it."""


def _n(shape: Shape | None) -> int:
    return math.prod(shape) if shape else (1 if shape == [] else 0)


def _out(info: OpInfo) -> int:
    return sum(_n(s) for s in info.outputs)


# -- contractions ----------------------------------------------------------
def _matmul(info: OpInfo) -> float:
    a = info.inputs[0]
    k = a[0] if info.attrs.get("transpose_a") else a[-1]
    return 2.0 * _n(info.outputs[0]) * k


def _batch_matmul(info: OpInfo) -> float:
    a = info.inputs[0]
    k = a[-2] if info.attrs.get("adj_x") else a[-1]
    return 2.0 * _n(info.outputs[0]) * k


def _einsum(info: OpInfo) -> float:
    """2 * product of every index's size when some index is summed over, else the output size."""
    equation = info.attrs.get("equation", "")
    if "->" not in equation:
        return float(_out(info))
    lhs, rhs = equation.replace(" ", "").split("->")
    sizes: dict[str, int] = {}
    terms = lhs.split(",")
    for term, shape in zip(terms, info.inputs):
        if "..." in term:
            head, tail = term.split("...")
            ell = shape[len(head): len(shape) - len(tail)] if shape else []
            for k, d in enumerate(reversed(ell)):  # broadcast ellipsis dims share names
                sizes[f"_{k}"] = max(sizes.get(f"_{k}", 1), d)
            term = head + tail
            shape = shape[: len(head)] + shape[len(shape) - len(tail):]
        for ch, d in zip(term, shape):
            sizes[ch] = max(sizes.get(ch, 1), d)
    out_letters = set(rhs.replace("...", ""))
    contracted = [ch for ch in sizes if not ch.startswith("_") and ch not in out_letters]
    total = math.prod(sizes.values())
    return 2.0 * total if contracted else float(total)


def _conv_positions(shape: Shape, channels_first: bool) -> int:
    """Batch x spatial positions of a conv-output-shaped tensor (all but channels)."""
    return _n(shape) // max(1, shape[1] if channels_first else shape[-1])


def _channels_first(info: OpInfo) -> bool:
    return str(info.attrs.get("data_format", "NHWC")).startswith("NC")


def _conv(info: OpInfo) -> float:
    """Forward conv: 2 * filter size * output positions (filter = kh*kw*cin*cout)."""
    return 2.0 * _n(info.inputs[1]) * _conv_positions(info.outputs[0], _channels_first(info))


def _conv_backprop_input(info: OpInfo) -> float:
    # inputs: input_sizes, filter, out_backprop
    return 2.0 * _n(info.inputs[1]) * _conv_positions(info.inputs[2], _channels_first(info))


def _conv_backprop_filter(info: OpInfo) -> float:
    # inputs: input, filter_sizes, out_backprop; output: the filter gradient
    return 2.0 * _n(info.outputs[0]) * _conv_positions(info.inputs[2], _channels_first(info))


# -- normalisation, pooling, softmax ----------------------------------------
def _fused_batch_norm(info: OpInfo) -> float:
    per = 8 if info.attrs.get("is_training", True) else 4
    return float(per * _n(info.inputs[0]))


def _pool(info: OpInfo) -> float:
    """Window x pooled output elements: each output compares (max) or adds (average) its window.

    Also MaxPoolWithArgmax (its second output, the argmax, is no extra pass), and
    MaxPoolGradGrad and MaxPool3DGradGrad, whose output has the pooled shape: for each
    element they search its window of orig_input for the max again and copy grad there.
    """
    window = _n(info.attrs.get("ksize") or [1])
    return float(window * _n(info.outputs[0]))


def _pool_grad(info: OpInfo) -> float:
    # MaxPoolGrad, MaxPool3DGrad: orig_input, orig_output, grad; AvgPoolGrad, AvgPool3DGrad:
    # orig_input_shape, grad. Per element of grad (pooled shape) the max ones search its window
    # for the max and add grad there; the average ones add grad / window to each window element.
    window = _n(info.attrs.get("ksize") or [1])
    return float(window * _n(info.inputs[-1]))


def _pool_grad_with_argmax(info: OpInfo) -> float:
    # MaxPoolGradWithArgmax: input, grad, argmax. The argmax replaces the window search: the kernel
    # zeroes the output and adds each grad element (pooled shape) at its argmax, 1 per element.
    return float(_n(info.inputs[1]))


def _const_window(info: OpInfo, k: int) -> int:
    """Elements of a pooling window given as data input `k` (the V2 ops' ``ksize``).

    Raises ValueError (so the op falls back, and is reported) when the input is
    not a known constant: counting a window of 1 would hide the error.
    """
    ksize = info.input_values[k] if k < len(info.input_values) else None
    if ksize is None:
        raise ValueError(f"{info.type}: the window (input {k}) is not a known constant")
    return _n(list(ksize))


def _pool_v2(info: OpInfo) -> float:
    # MaxPoolV2: input, ksize, strides
    return float(_const_window(info, 1) * _n(info.outputs[0]))


def _pool_grad_v2(info: OpInfo) -> float:
    # MaxPoolGradV2: orig_input, orig_output, grad, ksize, strides
    return float(_const_window(info, 3) * _n(info.inputs[2]))


def _pool_grad_grad_v2(info: OpInfo) -> float:
    # MaxPoolGradGradV2: orig_input, orig_output, grad, ksize, strides; as MaxPoolGradGrad, a window
    # search per element of the output (pooled shape)
    return float(_const_window(info, 3) * _n(info.outputs[0]))


def _per_element(k: float, which: str = "out") -> Callable[[OpInfo], float]:
    def rule(info: OpInfo) -> float:
        n = _out(info) if which == "out" else _n(info.inputs[0] if info.inputs else None)
        return float(k * n)

    return rule


def _per_element_of_last_input(info: OpInfo) -> float:
    return float(_n(info.inputs[-1]))


def _add_n(info: OpInfo) -> float:
    return float(max(0, len(info.inputs) - 1) * _n(info.outputs[0]))


# -- recurrent cells -------------------------------------------------------
def _lstm_block_cell(info: OpInfo) -> float:
    # inputs: x [B, I], cs_prev [B, H], h_prev [B, H], w [I+H, 4H], wci, wcf, wco, b
    b, h = info.inputs[1][0], info.inputs[1][1]
    w = info.inputs[3]
    return 2.0 * b * w[0] * w[1] + 16.0 * b * h


def _lstm_block_cell_grad(info: OpInfo) -> float:
    # gate gradients only; TF computes the matmul gradients with separate MatMul ops
    b, h = info.inputs[1][0], info.inputs[1][1]
    return 24.0 * b * h


def _block_lstm(info: OpInfo) -> float:
    # inputs: seq_len_max, x [T, B, I], cs_prev, h_prev, w [I+H, 4H], ...
    t, b = info.inputs[1][0], info.inputs[1][1]
    w = info.inputs[4]
    h = w[1] // 4
    return t * (2.0 * b * w[0] * w[1] + 16.0 * b * h)


def _block_lstm_grad(info: OpInfo) -> float:
    t, b = info.inputs[1][0], info.inputs[1][1]
    w = info.inputs[4]
    h = w[1] // 4
    return t * (4.0 * b * w[0] * w[1] + 24.0 * b * h)


def _gru_block_cell(info: OpInfo) -> float:
    # inputs: x [B, I], h_prev [B, H], w_ru [I+H, 2H], w_c [I+H, H], b_ru, b_c
    b, h = info.inputs[1]
    i = info.inputs[0][1]
    return 2.0 * b * (i + h) * 3 * h + 10.0 * b * h


def _gru_block_cell_grad(info: OpInfo) -> float:
    # the kernel's two matmuls back to [dx, dh_prev]: d_r_bar_u_bar @ w_ru^T and d_c_bar @ w_c^T,
    # 2*B*(I+H)*3H in all, plus the gate gradients; dW_ru and dW_c are separate MatMul ops
    # (the Python gradient's), as for LSTMBlockCellGrad
    b, h = info.inputs[1]
    i = info.inputs[0][1]
    return 2.0 * b * (i + h) * 3 * h + 16.0 * b * h


# -- optimizer apply ops: FLOPs per weight element ---------------------------
_APPLY_PER_WEIGHT = {
    "ResourceApplyGradientDescent": 2, "ApplyGradientDescent": 2,
    "ResourceApplyMomentum": 4, "ApplyMomentum": 4,
    "ResourceApplyKerasMomentum": 4,
    "ResourceApplyAdam": 12, "ApplyAdam": 12,
    "ResourceApplyAdagrad": 6, "ApplyAdagrad": 6, "ResourceApplyAdagradV2": 6,
    "ResourceApplyRMSProp": 10, "ApplyRMSProp": 10,
    "ResourceApplyCenteredRMSProp": 14,
    "ResourceApplyAdaMax": 10, "ResourceApplyFtrl": 20,
}


def _apply_rule(per: int) -> Callable[[OpInfo], float]:
    def rule(info: OpInfo) -> float:
        # the gradient is the last float input with the weight's shape; it is always the largest
        return float(per * max((_n(s) for s in info.inputs), default=0))

    return rule


# -- the rule table ----------------------------------------------------------
ELEMENTWISE = (
    "Add AddV2 Sub Mul Div RealDiv DivNoNan FloorDiv FloorMod TruncateDiv Mod Maximum Minimum "
    "Neg Abs Sign Square SquaredDifference Reciprocal Relu Relu6 LeakyRelu Elu Selu "
    "ReluGrad Relu6Grad LeakyReluGrad EluGrad SeluGrad BiasAdd BiasAddV1 Cast "
    "Less LessEqual Greater GreaterEqual Equal NotEqual LogicalAnd LogicalOr LogicalNot "
    "Select SelectV2 ClipByValue Floor Ceil Round Rint IsFinite IsNan "
    "MulNoNan Xdivy Xlogy "
    "ReciprocalGrad OnesLike ZerosLike Cumsum Cumprod"
).split()
TRANSCENDENTAL = (
    "Exp Expm1 Log Log1p Tanh Sigmoid Sqrt Rsqrt Pow Erf Erfc Sin Cos Tan Softplus Softsign "
    "TanhGrad SigmoidGrad SqrtGrad RsqrtGrad SoftplusGrad SoftsignGrad Gelu GeluGrad Atan2 Lgamma"
).split()
REDUCTIONS = "Sum Mean Max Min Prod ArgMax ArgMin All Any BiasAddGrad L2Loss EuclideanNorm".split()
ZERO_FLOPS = (
    "Const NoOp Placeholder PlaceholderWithDefault Identity IdentityN StopGradient Snapshot "
    "PreventGradient Reshape Squeeze ExpandDims Shape ShapeN Size Rank Transpose ConjugateTranspose "
    "ConcatV2 Concat Pack Unpack Split SplitV Slice StridedSlice StridedSliceGrad TensorScatterUpdate "
    "Tile Pad PadV2 MirrorPad GatherV2 Gather GatherNd ResourceGather ScatterNd Fill Range "
    "BroadcastTo BroadcastArgs BroadcastGradientArgs ConcatOffset InvertPermutation ReverseV2 OneHot "
    "ReadVariableOp VarHandleOp VariableV2 Variable VarIsInitializedOp AssignVariableOp Assign "
    "DestroyResourceOp _Arg _Retval _Recv _Send Enter Exit Merge Switch NextIteration LoopCond "
    "DeviceIndex Bitcast CheckNumerics Assert Print PrintV2 RandomUniform RandomStandardNormal "
    "TruncatedNormal StatelessRandomUniformV2 StatelessRandomNormalV2 StatelessTruncatedNormalV2 "
    "StatelessRandomGetKeyCounter RandomUniformInt StatelessRandomUniformIntV2 EmptyTensorList "
    "TensorListReserve TensorListFromTensor TensorListStack TensorListGetItem TensorListSetItem "
    "TensorListElementShape TensorListLength Where ZerosLike_ Empty DynamicStitch"
).split()

RULES: dict[str, Callable[[OpInfo], float]] = {
    "MatMul": _matmul,
    "BatchMatMul": _batch_matmul, "BatchMatMulV2": _batch_matmul, "BatchMatMulV3": _batch_matmul,
    "Einsum": _einsum,
    "Conv2D": _conv, "Conv3D": _conv, "DepthwiseConv2dNative": _conv,
    "Conv2DBackpropInput": _conv_backprop_input, "Conv3DBackpropInputV2": _conv_backprop_input,
    "DepthwiseConv2dNativeBackpropInput": _conv_backprop_input,
    "Conv2DBackpropFilter": _conv_backprop_filter, "Conv3DBackpropFilterV2": _conv_backprop_filter,
    "DepthwiseConv2dNativeBackpropFilter": _conv_backprop_filter,
    "FusedBatchNorm": _fused_batch_norm, "FusedBatchNormV2": _fused_batch_norm,
    "FusedBatchNormV3": _fused_batch_norm,
    "FusedBatchNormGrad": _per_element(10, "in"), "FusedBatchNormGradV2": _per_element(10, "in"),
    "FusedBatchNormGradV3": _per_element(10, "in"),
    "MaxPool": _pool, "AvgPool": _pool, "MaxPoolV2": _pool_v2, "MaxPool3D": _pool, "AvgPool3D": _pool,
    "MaxPoolWithArgmax": _pool,
    "MaxPoolGrad": _pool_grad, "AvgPoolGrad": _pool_grad, "MaxPoolGradV2": _pool_grad_v2,
    "MaxPool3DGrad": _pool_grad, "AvgPool3DGrad": _pool_grad,
    "MaxPoolGradWithArgmax": _pool_grad_with_argmax,
    "MaxPoolGradGrad": _pool, "MaxPool3DGradGrad": _pool, "MaxPoolGradGradV2": _pool_grad_grad_v2,
    # output[i] = grad[argmax[i]]: a gather, no arithmetic (as Gather)
    "MaxPoolGradGradWithArgmax": lambda info: 0.0,
    "Softmax": _per_element(5), "LogSoftmax": _per_element(5),
    "SoftmaxCrossEntropyWithLogits": _per_element(6, "in"),
    "SparseSoftmaxCrossEntropyWithLogits": _per_element(6, "in"),
    "AddN": _add_n,
    "UnsortedSegmentSum": _per_element(1, "in"), "SegmentSum": _per_element(1, "in"),
    "LSTMBlockCell": _lstm_block_cell, "LSTMBlockCellGrad": _lstm_block_cell_grad,
    "BlockLSTM": _block_lstm, "BlockLSTMV2": _block_lstm,
    "BlockLSTMGrad": _block_lstm_grad, "BlockLSTMGradV2": _block_lstm_grad,
    "GRUBlockCell": _gru_block_cell, "GRUBlockCellGrad": _gru_block_cell_grad,
}
RULES.update({t: _per_element(1) for t in ELEMENTWISE})
RULES.update({t: _per_element(4) for t in TRANSCENDENTAL})
RULES.update({t: _per_element(1, "in") for t in REDUCTIONS})
RULES.update({t: (lambda info: 0.0) for t in ZERO_FLOPS})
RULES.update({t: _apply_rule(per) for t, per in _APPLY_PER_WEIGHT.items()})
# in-place updates ``var += value``: one FLOP per element of `value`, the last input (resource
# assigns output nothing, so counting outputs would give 0); sparse updates (embedding gradients):
# one FLOP per element of `updates`, the last input
RULES.update({t: _per_element_of_last_input for t in (
    "AssignAddVariableOp", "AssignSubVariableOp", "AssignAdd", "AssignSub",
    "ResourceScatterAdd", "ResourceScatterSub", "ResourceScatterMul", "ResourceScatterDiv",
    "ResourceScatterMin", "ResourceScatterMax", "ScatterAdd", "ScatterSub", "TensorScatterAdd",
    "TensorScatterSub")})

# Multiply-adds of these op types are what published "multiply-adds per image" count.
CONTRACTIONS = frozenset(
    ["MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Einsum", "Conv2D", "Conv3D",
     "DepthwiseConv2dNative"]
)


def fallback_flops(info: OpInfo) -> float:
    """The documented fallback: one FLOP per output element."""
    return float(_out(info))


def op_flops(info: OpInfo) -> tuple[float, bool]:
    """FLOPs of one execution, and whether the fallback was used.

    A rule that cannot read the shapes it needs (an input of unknown rank, say)
    also falls back, so a strange op never stops an import.
    """
    rule = RULES.get(info.type)
    if rule is None:
        return fallback_flops(info), True
    try:
        return float(rule(info)), False
    except (IndexError, TypeError, ValueError, ZeroDivisionError):
        return fallback_flops(info), True
