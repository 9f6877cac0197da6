"""Per-op compute time on each device: the op's own cost, or a roofline.

An op's ``cost`` (measured or modelled seconds for a device kind, matched
whatever the case: ``"GPU"`` is ``"gpu"``) wins. Where
an op has none for a device's kind, its time is the roofline estimate

    max(flops / peak_flops, bytes_accessed / memory_bandwidth) + op_overhead

with ``bytes_accessed`` = bytes read from the op's producers + bytes it writes.
"""

from __future__ import annotations

import numpy as np

from placer.cluster import Cluster, Device
from placer.graph import OpGraph


def roofline_time(flops: float, bytes_accessed: float, device: Device) -> float:
    """Seconds for an op doing `flops` and moving `bytes_accessed` on `device`."""
    return max(flops / device.peak_flops, bytes_accessed / device.memory_bandwidth) + device.op_overhead


def input_bytes(graph: OpGraph) -> np.ndarray:
    """Bytes each op reads: the sum of its distinct producers' output bytes."""
    p_off, p_idx = graph.predecessors
    out = np.array([op.output_bytes for op in graph.ops], dtype=np.float64)
    per_edge = out[p_idx]
    sums = np.zeros(len(per_edge) + 1)
    np.cumsum(per_edge, out=sums[1:])
    return sums[p_off[1:]] - sums[p_off[:-1]]


def op_time_matrix(graph: OpGraph, cluster: Cluster) -> np.ndarray:
    """Seconds of every op on every device, shape ``[num_ops, num_devices]``."""
    flops = np.array([op.flops for op in graph.ops], dtype=np.float64)
    moved = input_bytes(graph) + np.array([op.output_bytes for op in graph.ops], dtype=np.float64)
    times = np.empty((len(graph), len(cluster)), dtype=np.float64)
    columns: dict[str, list[int]] = {}
    for j, dev in enumerate(cluster.devices):
        times[:, j] = np.maximum(flops / dev.peak_flops, moved / dev.memory_bandwidth) + dev.op_overhead
        # kinds match whatever their case: a cluster file's kind is lowercased when
        # parsed ("GPU" -> "gpu"), a graph's cost keys are kept as written, so a
        # cost {"GPU": ...} for a cluster saying "GPU" was silently ignored
        columns.setdefault(dev.kind.lower(), []).append(j)
    for i, op in enumerate(graph.ops):
        for kind, seconds in op.cost.items():
            for j in columns.get(kind.lower(), ()):
                times[i, j] = seconds
    return times
