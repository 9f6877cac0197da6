"""Colocation units, the memory ledger and the memory repair pass."""

import numpy as np

from placer.cluster import Cluster, Device, Link
from placer.graph import Op, OpGraph
from placer.placers.common import MemoryLedger, Problem, colocation_units, fit_to_memory


def cluster(memory=10.0, kinds=("gpu", "gpu")):
    return Cluster("c", [Device(f"D{i}", k, 1e12, 1e12, memory) for i, k in enumerate(kinds)],
                   default_link=Link(1.0, 0.0))


def test_units_group_colocated_ops_and_follow_topological_order():
    g = OpGraph("g", [Op("v", "Var", colocation="k"), Op("a", "X", ["v"]), Op("u", "Upd", ["a"], colocation="k"),
                      Op("b", "X", ["a"])])
    unit = colocation_units(g)
    assert unit[g.index["v"]] == unit[g.index["u"]] == 0
    assert sorted(set(unit.tolist())) == [0, 1, 2]


def test_unit_memory_is_weights_plus_outputs():
    g = OpGraph("g", [Op("v", "Var", param_bytes=3, output_bytes=1, colocation="k"),
                      Op("u", "Upd", ["v"], output_bytes=2, colocation="k")])
    p = Problem.build(g, cluster())
    assert p.unit_memory.tolist() == [6.0]


def test_candidates_are_the_gpus_or_every_device():
    g = OpGraph("g", [Op("a", "X")])
    assert Problem.build(g, cluster(kinds=("cpu", "gpu"))).candidates.tolist() == [1]
    assert Problem.build(g, cluster(kinds=("cpu", "cpu"))).candidates.tolist() == [0, 1]


def test_ledger_falls_back_to_the_roomiest_device_and_says_so():
    g = OpGraph("g", [Op("a", "X", param_bytes=20)])
    p = Problem.build(g, cluster(memory=10))
    ledger = MemoryLedger(p)
    assert ledger.feasible(0, np.array([0, 1])).size == 0
    assert ledger.choose(0, np.array([0, 1])).tolist() == [0]
    assert ledger.exceeded


def test_fit_to_memory_moves_the_last_units_off_a_full_device():
    g = OpGraph("g", [Op(f"o{k}", "X", [f"o{k - 1}"] if k else [], param_bytes=4) for k in range(4)])
    p = Problem.build(g, cluster(memory=10))
    unit_device, ledger = fit_to_memory(p, np.zeros(4, dtype=np.int64), p.candidates)
    assert unit_device.tolist() == [0, 0, 1, 1]
    assert not ledger.exceeded


def test_gradient_ops_join_their_forward_op():
    """Exact forward op first, else the first forward op of the deepest shared scope."""
    from placer.placers.common import forward_units

    g = OpGraph("g", [
        Op("net/conv1/Conv2D", "Conv2D"), Op("net/conv1/Relu", "Relu", ["net/conv1/Conv2D"]),
        Op("loss", "Mean", ["net/conv1/Relu"]),
        Op("gradient_tape/net/conv1/Relu/ReluGrad", "ReluGrad", ["loss"]),
        Op("gradient_tape/net/conv1/Reshape", "Reshape", ["gradient_tape/net/conv1/Relu/ReluGrad"]),
        Op("gradient_tape/Mean/Tile", "Tile", ["loss"]),
    ])
    unit = forward_units(g, colocation_units(g), np.zeros(len(g)), 1.0)
    ix = g.index
    assert unit[ix["gradient_tape/net/conv1/Relu/ReluGrad"]] == unit[ix["net/conv1/Relu"]]
    assert unit[ix["gradient_tape/net/conv1/Reshape"]] == unit[ix["net/conv1/Conv2D"]]
    assert unit[ix["gradient_tape/Mean/Tile"]] != unit[ix["loss"]]  # one-level scopes are not matched
