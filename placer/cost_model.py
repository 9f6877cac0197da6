"""Per-op compute time on each device: the op's own cost, or a roofline.

An op's ``cost`` (measured or modelled seconds for a device kind, matched
whatever the case: ``"GPU"`` is ``"gpu"``) wins. Where
an op has none for a device's kind, its time is the roofline estimate

    max(flops / peak_flops, bytes_accessed / memory_bandwidth) + op_overhead

with ``bytes_accessed`` = bytes read from the op's producers + bytes it writes.
Where the graph's meta holds a roofline fit for the device's kind
(``meta["roofline_fit"][kind]``, written by ``placer profile``), the peaks
are scaled by the fitted compute and memory efficiencies and the fitted
per-op overhead replaces the device's: ops the profile did not time get
estimates calibrated on the ops it did.
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


FIT_KEY = "roofline_fit"


def fitted_rates(graph: OpGraph, device: Device) -> tuple[float, float, float]:
    """``(flop/s, bytes/s, op overhead)`` of `device` for `graph`'s ops: its peaks, or the graph's fit for its kind."""
    fit = graph.meta.get(FIT_KEY, {}).get(device.kind.lower())
    if not fit:
        return device.peak_flops, device.memory_bandwidth, device.op_overhead
    return (device.peak_flops * fit["compute_efficiency"], device.memory_bandwidth * fit["memory_efficiency"],
            fit["op_overhead"])


def op_time_matrix(graph: OpGraph, cluster: Cluster) -> np.ndarray:
    """Seconds of every op on every device, shape ``[num_ops, num_devices]``."""
    flops = np.array([op.flops for op in graph.ops], dtype=np.float64)
    moved = input_bytes(graph) + np.array([op.output_bytes for op in graph.ops], dtype=np.float64)
    times = np.empty((len(graph), len(cluster)), dtype=np.float64)
    columns: dict[str, list[int]] = {}
    for j, dev in enumerate(cluster.devices):
        peak, bandwidth, overhead = fitted_rates(graph, dev)
        times[:, j] = np.maximum(flops / peak, moved / bandwidth) + overhead
        # kinds match whatever their case: a cluster file's kind is lowercased when
        # parsed ("GPU" -> "gpu"), a graph's cost keys are kept as written, so a
        # cost {"GPU": ...} for a cluster saying "GPU" was silently ignored
        columns.setdefault(dev.kind.lower(), []).append(j)
    for i, op in enumerate(graph.ops):
        for kind, seconds in op.cost.items():
            for j in columns.get(kind.lower(), ()):
                times[i, j] = seconds
    return times
