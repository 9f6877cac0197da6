"""Per-op compute time on each device: the op's own cost, or a model by op class.

An op's ``cost`` (measured or modelled seconds for a device kind, matched
whatever the case: ``"GPU"`` is ``"gpu"``) wins. Where an op has none for a
device's kind, its time on the device is

    kernel = max(flops / rate, bytes_accessed / (memory_bandwidth * memory_efficiency))
    time   = max(kernel + op_overhead, dispatch)

- ``rate`` by op class (`op_class`): matrix ops (MatMul, convolutions and
  their gradients, Einsum...) run at ``matrix_flops * matrix_efficiency``
  (the tensor-core rate the framework uses: TF32 on Ampere and Hopper, where
  TensorFlow enables it by default); every other op at ``peak_flops`` (FP32);
- ``bytes_accessed`` = bytes read from the op's producers + bytes it writes;
- ``op_overhead`` is the device's gap between back-to-back kernels, and
  ``dispatch`` the host time to issue one op: kernels queue asynchronously,
  so the device is held by whichever is longer (docs/simulator.md);
- with ``fusion`` (XLA-style; docs/simulator.md), an element-wise op whose
  output feeds exactly one op, itself element-wise, runs inside that op's
  kernel: it pays for its reads and FLOPs but no launch gap or dispatch, and
  the tensor between them is neither written nor read nor held in memory
  (`resident_bytes`). Ops that only relabel a tensor (Reshape, Identity...)
  move no bytes and hold no new memory.

A device without the optional fields (``matrix_flops`` = ``peak_flops``,
efficiencies 1, ``dispatch`` 0, no ``fusion``) gets exactly the plain
roofline ``max(flops / peak_flops, bytes / memory_bandwidth) + op_overhead``.

Where the graph's meta holds a roofline fit for the device's kind
(``meta["roofline_fit"][kind]``, written by ``placer profile``), that fit
replaces the device's model for ops without a cost: the plain roofline with
the peaks scaled by the fitted compute and memory efficiencies and the
fitted per-op overhead, so ops the profile did not time get estimates
calibrated on the ops it did.
"""

from __future__ import annotations

import numpy as np

from placer.cluster import Cluster, Device
from placer.graph import OpGraph

MATRIX_OPS = frozenset({
    "MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Einsum", "_FusedMatMul",
    "Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "_FusedConv2D",
    "Conv3D", "Conv3DBackpropInputV2", "Conv3DBackpropFilterV2",
    "BlockLSTM", "BlockLSTMV2", "BlockLSTMGrad", "BlockLSTMGradV2", "LSTMBlockCell", "LSTMBlockCellGrad",
    "GRUBlockCell", "GRUBlockCellGrad", "CudnnRNN", "CudnnRNNV2", "CudnnRNNV3", "CudnnRNNBackprop",
    "CudnnRNNBackpropV2", "CudnnRNNBackpropV3",
})
"""Ops whose FLOPs run on tensor cores (cuBLAS / cuDNN GEMMs). Depthwise
convolutions are not among them: they run on CUDA cores, memory-bound."""

ELEMENTWISE_OPS = frozenset({
    "Abs", "Add", "AddV2", "AddN", "BiasAdd", "Cast", "Ceil", "Cos", "Div", "DivNoNan", "Elu", "EluGrad", "Equal",
    "Erf", "Exp", "Floor", "FloorDiv", "FloorMod", "Gelu", "Greater", "GreaterEqual", "Inv", "LeakyRelu",
    "LeakyReluGrad", "Less", "LessEqual", "Log", "Log1p", "LogicalAnd", "LogicalNot", "LogicalOr", "Maximum",
    "Minimum", "Mod", "Mul", "MulNoNan", "Neg", "NotEqual", "OnesLike", "Pow", "RealDiv", "Reciprocal",
    "ReciprocalGrad", "Relu", "Relu6", "Relu6Grad", "ReluGrad", "Round", "Rsqrt", "RsqrtGrad", "Select",
    "SelectV2", "Selu", "SeluGrad", "Sigmoid", "SigmoidGrad", "Sign", "Sin", "Softplus", "SoftplusGrad",
    "Softsign", "Sqrt", "SqrtGrad", "Square", "SquaredDifference", "Sub", "Swish", "Tanh", "TanhGrad",
    "ZerosLike",
})
"""Ops computed element by element, which XLA and TensorFlow's grappler fuse into chains."""

ALIAS_OPS = frozenset({
    "Identity", "IdentityN", "Reshape", "Squeeze", "ExpandDims", "ReadVariableOp", "StopGradient", "Snapshot",
    "PreventGradient", "Shape", "ShapeN", "Size", "Rank", "BroadcastGradientArgs",
})
"""Ops that relabel a tensor or read its metadata: TensorFlow runs them without a GPU kernel."""

MATRIX, ELEMENTWISE, ALIAS, OTHER = 0, 1, 2, 3


def op_class(op_type: str) -> int:
    """`MATRIX`, `ELEMENTWISE`, `ALIAS` or `OTHER` (reductions, pooling, copies: memory-bound)."""
    if op_type in MATRIX_OPS:
        return MATRIX
    if op_type in ELEMENTWISE_OPS:
        return ELEMENTWISE
    if op_type in ALIAS_OPS:
        return ALIAS
    return OTHER


def roofline_time(flops: float, bytes_accessed: float, device: Device, matrix: bool = False) -> float:
    """Seconds for an op doing `flops` and moving `bytes_accessed` on `device` (no fusion).

    `matrix`: the op runs at the device's matrix rate (`op_class` MATRIX).
    """
    rate = device.matrix_rate if matrix else device.peak_flops
    kernel = max(flops / rate, bytes_accessed / (device.memory_bandwidth * device.memory_efficiency))
    return max(kernel + device.op_overhead, device.dispatch)


def input_bytes(graph: OpGraph) -> np.ndarray:
    """Bytes each op reads: the sum of its distinct producers' output bytes."""
    p_off, p_idx = graph.predecessors
    out = np.array([op.output_bytes for op in graph.ops], dtype=np.float64)
    per_edge = out[p_idx]
    sums = np.zeros(len(per_edge) + 1)
    np.cumsum(per_edge, out=sums[1:])
    return sums[p_off[1:]] - sums[p_off[:-1]]


FIT_KEY = "roofline_fit"


def fitted_rates(graph: OpGraph, device: Device) -> tuple[float, float, float] | None:
    """``(flop/s, bytes/s, op overhead)`` of `device` for `graph`'s ops from the graph's fit for its kind
    (its peaks scaled by the fitted efficiencies), or None where the graph has no fit for that kind."""
    fit = graph.meta.get(FIT_KEY, {}).get(device.kind.lower())
    if not fit:
        return None
    return (device.peak_flops * fit["compute_efficiency"], device.memory_bandwidth * fit["memory_efficiency"],
            fit["op_overhead"])


def fused_into_consumer(graph: OpGraph) -> np.ndarray:
    """bool[num_ops]: element-wise ops whose output feeds exactly one op, itself element-wise.

    Under fusion such an op runs inside its consumer's kernel (the rule of
    XLA's and grappler's element-wise fusion, restricted to single consumers,
    which never duplicates work).
    """
    classes = np.array([op_class(op.op) for op in graph.ops], dtype=np.int64)
    s_off, s_idx = graph.successors
    single = np.diff(s_off) == 1
    consumer = np.zeros(len(graph), dtype=np.int64)
    consumer[single] = s_idx[s_off[:-1][single]]
    return (classes == ELEMENTWISE) & single & (classes[consumer] == ELEMENTWISE)


def _fused_bytes(graph: OpGraph, out: np.ndarray, fused: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """Bytes each op moves when fusion is on: inputs from fused producers and fused outputs stay on chip."""
    p_off, p_idx = graph.predecessors
    per_edge = np.where(fused[p_idx], 0.0, out[p_idx])
    sums = np.zeros(len(per_edge) + 1)
    np.cumsum(per_edge, out=sums[1:])
    moved = sums[p_off[1:]] - sums[p_off[:-1]] + np.where(fused, 0.0, out)
    moved[classes == ALIAS] = 0.0
    return moved


def op_time_matrix(graph: OpGraph, cluster: Cluster) -> np.ndarray:
    """Seconds of every op on every device, shape ``[num_ops, num_devices]``."""
    flops = np.array([op.flops for op in graph.ops], dtype=np.float64)
    out = np.array([op.output_bytes for op in graph.ops], dtype=np.float64)
    moved = input_bytes(graph) + out
    classes = np.array([op_class(op.op) for op in graph.ops], dtype=np.int64)
    matrix = classes == MATRIX
    fused = fused_moved = None
    if any(d.fusion for d in cluster.devices):
        fused = fused_into_consumer(graph)
        fused_moved = _fused_bytes(graph, out, fused, classes)
    times = np.empty((len(graph), len(cluster)), dtype=np.float64)
    columns: dict[str, list[int]] = {}
    for j, dev in enumerate(cluster.devices):
        fitted = fitted_rates(graph, dev)
        columns.setdefault(dev.kind.lower(), []).append(j)
        if fitted is not None:  # the profile's fit replaces the device's model
            peak, bandwidth, overhead = fitted
            times[:, j] = np.maximum(flops / peak, moved / bandwidth) + overhead
            continue
        rate = np.where(matrix, dev.matrix_rate, dev.peak_flops)
        nbytes = fused_moved if dev.fusion else moved
        kernel = np.maximum(flops / rate, nbytes / (dev.memory_bandwidth * dev.memory_efficiency))
        times[:, j] = np.maximum(kernel + dev.op_overhead, dev.dispatch)
        if dev.fusion:  # part of its consumer's kernel: its own reads and FLOPs, no launch of its own
            times[fused, j] = kernel[fused]
    # kinds match whatever their case: a cluster file's kind is lowercased when
    # parsed ("GPU" -> "gpu"), a graph's cost keys are kept as written, so a
    # cost {"GPU": ...} for a cluster saying "GPU" was silently ignored
    for i, op in enumerate(graph.ops):
        for kind, seconds in op.cost.items():
            for j in columns.get(kind.lower(), ()):
                times[i, j] = seconds
    return times


def resident_bytes(graph: OpGraph, cluster: Cluster) -> np.ndarray:
    """Bytes each op's output occupies on each device it runs on, ``[num_ops, num_devices]``.

    Its output bytes, except on a device with ``fusion``: a fused op's output
    stays on chip and a relabelling op's output is its input's memory, so
    both hold none. A copy received from another device always holds its bytes.
    """
    out = np.array([op.output_bytes for op in graph.ops], dtype=np.float64)
    held = np.repeat(out[:, None], len(cluster), axis=1)
    fusing = [j for j, d in enumerate(cluster.devices) if d.fusion]
    if fusing:
        classes = np.array([op_class(op.op) for op in graph.ops], dtype=np.int64)
        free = fused_into_consumer(graph) | (classes == ALIAS)
        held[np.ix_(free, fusing)] = 0.0
    return np.ascontiguousarray(held)
