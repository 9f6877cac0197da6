"""The benchmark graphs in graphs/ (made by graphs/make_graphs.py): present, valid, documented."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from placer.graph_io import load_graph

GRAPHS = Path(__file__).resolve().parents[3] / "graphs"
NAMES = ["inception_v3", "resnet50", "rnnlm", "nmt", "nmt4", "transformer"]


@pytest.mark.parametrize("name", NAMES)
def test_graph_is_valid_and_documented(name):
    path = GRAPHS / f"{name}.json.gz"
    assert path.stat().st_size < 4 * 2**20
    g = load_graph(path)
    m = g.meta
    for key in ("source_model", "batch_size", "sequence_length", "op_count", "total_flops",
                "forward_macs_per_example", "tf_node_count", "folded"):
        assert key in m, key
    assert m["op_count"] == len(g)
    assert m["tf_node_count"] - sum(m["folded"].values()) == len(g)
    assert m["total_flops"] == pytest.approx(sum(op.flops for op in g))
    assert m["training"] is True and any(op.name.startswith("gradient_tape/") for op in g)
    assert all(not op.cost for op in g)  # the simulator's roofline applies per device


def test_batches_match_the_suite():
    batches = {n: load_graph(GRAPHS / f"{n}.json.gz").meta["batch_size"] for n in NAMES}
    assert batches == {"inception_v3": 32, "resnet50": 32, "rnnlm": 64, "nmt": 128, "nmt4": 128,
                       "transformer": batches["transformer"]}


def test_transformer_does_not_fit_one_gpu_of_2gpu_flat():
    """The meta was recorded on 2gpu-flat (plain roofline, 15 GiB); on 2gpu fused chains let it fit."""
    from placer import presets
    from placer.simulator import Simulator

    g = load_graph(GRAPHS / "transformer.json.gz")
    cluster = presets.get("2gpu-flat")
    gpu0 = [d.name for d in cluster.devices].index("/device:GPU:0")
    res = Simulator(g, cluster).run(np.full(len(g), gpu0, dtype=np.int64))
    assert res.oom and res.peak_memory[gpu0] > cluster.devices[gpu0].memory_bytes
    assert g.meta["one_gpu_fits_2gpu_preset"] is False
