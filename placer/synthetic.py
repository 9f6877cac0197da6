"""Synthetic graphs shaped like training steps, for benchmarks and tests.

Real graphs come from the importers (`graphs/`); these exist to scale a
benchmark to any op count and to give property tests endless small DAGs.
"""

from __future__ import annotations

import numpy as np

from placer.graph import Op, OpGraph


def layered_graph(num_ops: int, width: int = 8, fan_in: int = 2, seed: int = 0,
                  kinds: tuple[str, ...] = ("gpu", "cpu")) -> OpGraph:
    """A random layered DAG: each op reads up to `fan_in` ops of the previous few layers.

    Costs are drawn log-uniformly (1 us to 1 ms on a GPU, 10x on the CPU),
    outputs 4 KiB to 16 MiB, and one op in ten owns weights.
    """
    rng = np.random.default_rng(seed)
    ops: list[Op] = []
    for i in range(num_ops):
        layer = i // width
        inputs: list[str] = []
        if layer > 0:
            lo = max(0, (layer - 3) * width)
            hi = layer * width
            k = int(rng.integers(1, fan_in + 1))
            inputs = sorted({f"op{int(j)}" for j in rng.integers(lo, hi, size=k)})
        gpu = float(10 ** rng.uniform(-6, -3))
        cost = {"gpu": gpu, "cpu": 10 * gpu}
        ops.append(Op(
            name=f"op{i}", op=["MatMul", "Conv2D", "AddV2", "Relu"][i % 4], inputs=inputs,
            output_shapes=[[1024]], output_bytes=float(2 ** rng.integers(12, 25)),
            flops=gpu * 1e13, param_bytes=float(2 ** rng.integers(16, 24)) if i % 10 == 0 else 0.0,
            cost={k: v for k, v in cost.items() if k in kinds},
        ))
    return OpGraph(f"layered{num_ops}", ops, {"source": "placer.synthetic.layered_graph", "seed": seed})
