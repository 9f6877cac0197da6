"""Fit a device kind's roofline to profiled op times: compute and memory efficiency, per-op overhead.

The cost model's estimate of an op without a profiled cost is

    max(flops / (e_c * peak_flops), bytes / (e_m * memory_bandwidth)) + overhead

(`placer.cost_model.fitted_rates`). Given the ops a profile timed, the fit
picks ``e_c``, ``e_m`` and ``overhead`` that minimise the
squared error of log times: a profile's times span five orders of
magnitude (a 1 us ``Shape``, a 10 ms convolution), and relative error is
what a step time sums up badly. The search is a grid (61 values of each
efficiency, log-spaced from 1e-4 to 100, and the overheads at the profile's
quantiles; an efficiency above 1 is real where the peak is a measured
streaming rate and small tensors stay in cache), exact over its grid and
fast enough for 10k ops, with no local minima to fall into. Ops that do no
work the roofline sees (no FLOPs, no bytes) fit the overhead alone. An
efficiency at the grid's edge (1e-4 or 100) says that term bounds no op of
the profile (on a CPU, the memory term often: the measured streaming rate
is far below what cache-sized tensors get).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from placer.cluster import Device
from placer.cost_model import input_bytes
from placer.errors import PlacerError
from placer.graph import OpGraph

EFFICIENCIES = np.logspace(-4, 2, 61)
OVERHEAD_QUANTILES = np.linspace(0.0, 0.5, 11)


@dataclass(frozen=True)
class RooflineFit:
    """A device kind's fitted roofline (stored in a graph's ``meta["roofline_fit"][kind]``).

    Attributes
    ----------
    compute_efficiency, memory_efficiency : factors on the device's peak FLOP/s and memory bandwidth.
    op_overhead : seconds added to every op.
    peak_flops, memory_bandwidth : the peaks the efficiencies are fractions of (for people; the cost
        model scales whatever device of the kind it is given).
    ops : ops the fit was made on.
    median_error : median over those ops of max(fit / profiled, profiled / fit) - 1.
    mape : mean absolute percentage error of the fit over those ops.
    """

    compute_efficiency: float
    memory_efficiency: float
    op_overhead: float
    peak_flops: float
    memory_bandwidth: float
    ops: int
    median_error: float
    mape: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def fit_roofline(graph: OpGraph, seconds: dict[str, float], device: Device) -> RooflineFit:
    """Fit `device`'s roofline to `seconds` (profiled seconds of ops of `graph`, by name).

    Raises
    ------
    PlacerError
        If no op of `graph` has a positive profiled time.
    """
    idx = np.array([graph.index[n] for n, s in seconds.items() if n in graph.index and s > 0], dtype=np.int64)
    if len(idx) == 0:
        raise PlacerError(f"graph {graph.name!r}: no profiled op time to fit a roofline to")
    measured = np.array([seconds[graph.ops[i].name] for i in idx])
    flops = np.array([graph.ops[i].flops for i in idx], dtype=np.float64)
    moved = (input_bytes(graph) + np.array([op.output_bytes for op in graph.ops], dtype=np.float64))[idx]
    log_m = np.log(measured)
    compute = flops[:, None] / (EFFICIENCIES[None, :] * device.peak_flops)  # [ops, E]
    memory = moved[:, None] / (EFFICIENCIES[None, :] * device.memory_bandwidth)
    best = (np.inf, 1.0, 1.0, 0.0)
    for overhead in np.quantile(measured, OVERHEAD_QUANTILES):
        for c in range(len(EFFICIENCIES)):  # [ops, Em] per compute efficiency: memory stays O(ops)
            pred = np.maximum(compute[:, c:c + 1], memory) + overhead
            err = ((np.log(np.maximum(pred, 1e-12)) - log_m[:, None]) ** 2).sum(axis=0)
            m = int(np.argmin(err))
            if err[m] < best[0]:
                best = (float(err[m]), float(EFFICIENCIES[c]), float(EFFICIENCIES[m]), float(overhead))
    _, e_c, e_m, overhead = best
    pred = np.maximum(flops / (e_c * device.peak_flops), moved / (e_m * device.memory_bandwidth)) + overhead
    ratio = np.maximum(pred / measured, measured / pred)
    return RooflineFit(e_c, e_m, overhead, device.peak_flops, device.memory_bandwidth, int(len(idx)),
                       float(np.median(ratio) - 1), float(np.mean(np.abs(pred - measured) / measured)))
