"""Fitting a roofline to profiled op times, and the cost model using the fit."""

from __future__ import annotations

import numpy as np
import pytest

from placer.cluster import Cluster, Device
from placer.cost_model import FIT_KEY, op_time_matrix
from placer.errors import PlacerError
from placer.graph import Op, OpGraph
from placer.measure.fit import fit_roofline

DEVICE = Device("/device:CPU:0", "cpu-local", peak_flops=1e11, memory_bandwidth=1e10, memory_bytes=1e9,
                op_overhead=1e-6)


def chain(n: int = 30) -> OpGraph:
    """Compute-bound MatMuls and memory-bound Adds (no FLOPs), one after another."""
    rng = np.random.default_rng(0)
    ops = []
    for i in range(n):
        ops.append(Op(f"op{i}", "MatMul" if i % 2 else "Add", [f"op{i - 1}"] if i else [],
                      output_bytes=float(rng.integers(1e3, 1e7)), flops=float(rng.integers(1e6, 1e9)) * (i % 2)))
    return OpGraph("chain", ops)


def test_recovers_the_efficiencies_that_made_the_times():
    g = chain()
    slow = Device(**{**DEVICE.to_dict(), "peak_flops": 1e11 * 0.1, "memory_bandwidth": 1e10 * 0.5,
                     "op_overhead": 4e-6})
    times = op_time_matrix(g, Cluster("c", [slow]))[:, 0]
    fit = fit_roofline(g, {op.name: t for op, t in zip(g.ops, times)}, DEVICE)
    assert fit.compute_efficiency == pytest.approx(0.1, rel=0.3)  # a grid of 1.26x steps
    assert fit.memory_efficiency == pytest.approx(0.5, rel=0.3)
    assert fit.median_error < 0.1 and fit.ops == len(g)


def test_the_cost_model_reads_the_fit_for_ops_without_a_cost():
    g = chain(4)
    g.ops[0].cost["cpu-local"] = 7.0
    plain = op_time_matrix(g, Cluster("c", [DEVICE]))[:, 0]
    g.meta[FIT_KEY] = {"cpu-local": {"compute_efficiency": 0.5, "memory_efficiency": 0.5, "op_overhead": 2e-6}}
    fitted = op_time_matrix(g, Cluster("c", [DEVICE]))[:, 0]
    assert fitted[0] == 7.0  # a profiled cost wins
    assert np.all(fitted[1:] > plain[1:])
    other = Device(**{**DEVICE.to_dict(), "kind": "gpu"})
    assert np.allclose(op_time_matrix(g, Cluster("c", [other]))[1:, 0], plain[1:])  # another kind: no fit


def test_nothing_to_fit():
    with pytest.raises(PlacerError, match="no profiled op time"):
        fit_roofline(chain(3), {}, DEVICE)
