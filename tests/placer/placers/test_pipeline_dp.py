"""pipeline_dp: the optimal contiguous split for max device load, checked against brute force."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from placer.cluster import Cluster, Device, Link
from placer.errors import PlacerError
from placer.graph import Op, OpGraph
from placer.objectives import ThroughputModel
from placer.placers.pipeline_dp import _route_swap, best_split
from placer.placers.pipeline_units import build_units, chain_ideals, enumerate_ideals, TooManyIdeals
from placer.placers.registry import place
from placer.synthetic import layered_graph
from tests.placer.helpers import GB, two_switches

DATASET = Path(__file__).resolve().parents[3] / ".." / "shared" / "datasets" / "msr_dnn_partitioning"


def _cluster(gpus: int, memory: float = 1e9, cpu: bool = False) -> Cluster:
    dev = dict(peak_flops=1e12, memory_bandwidth=1e11)
    devices = [Device("CPU", "cpu", memory_bytes=1e12, **dev)] if cpu else []
    devices += [Device(f"G{i}", "gpu", memory_bytes=memory, **dev) for i in range(gpus)]
    return Cluster("c", devices, default_link=Link(1e9, 0.0))


def _chain(costs, transfer=0.0, params=None) -> OpGraph:
    ops = []
    for k, c in enumerate(costs):
        ops.append(Op(f"op{k}", "X", [f"op{k - 1}"] if k else [], cost={"gpu": c, "cpu": 10 * c},
                      transfer_time=transfer if k < len(costs) - 1 else None,
                      param_bytes=0 if params is None else params[k]))
    return OpGraph("chain", ops)


def _best_interval_split(costs, transfer, devices):
    """Brute force over cut points of a chain (each device one interval, maybe empty)."""
    n, best = len(costs), np.inf
    for cuts in itertools.combinations_with_replacement(range(n + 1), devices - 1):
        bounds = (0, *cuts, n)
        loads = []
        for d in range(devices):
            lo, hi = bounds[d], bounds[d + 1]
            if lo == hi:
                continue
            comm = (transfer if lo > 0 else 0) + (transfer if hi < n else 0)
            loads.append(sum(costs[lo:hi]) + comm)
        best = min(best, max(loads))
    return best


class TestBestSplit:
    def test_hand_computed_chain(self):
        """1,2,3,4 on two GPUs: {0,1,2} | {3} = max(6, 4) = 6."""
        g, c = _chain([1.0, 2.0, 3.0, 4.0]), _cluster(2)
        assignment, value, info = best_split(g, c)
        assert value == 6.0
        assert info["search"] == "ideals"
        assert assignment[0] == assignment[1] == assignment[2] != assignment[3]

    @pytest.mark.parametrize("seed", range(6))
    def test_chain_matches_brute_force(self, seed):
        rng = np.random.default_rng(seed)
        costs = rng.uniform(0.5, 5.0, size=7).round(3).tolist()
        transfer = float(rng.choice([0.0, 0.3, 2.0]))
        g, c = _chain(costs, transfer), _cluster(3)
        _, value, _ = best_split(g, c)
        assert value == pytest.approx(_best_interval_split(costs, transfer, 3), rel=1e-12)

    def test_dp_value_is_the_exact_objective(self):
        rng = np.random.default_rng(1)
        ops = [Op("in", "X", [], cost={"gpu": 1.0, "cpu": 5.0}, transfer_time=0.25)]
        for k in range(8):
            srcs = sorted({ops[int(i)].name for i in rng.integers(0, len(ops), size=2)})
            ops.append(Op(f"n{k}", "X", srcs, cost={"gpu": float(rng.uniform(1, 3)), "cpu": 9.0},
                          transfer_time=float(rng.uniform(0, 0.5))))
        g, c = OpGraph("dag", ops), _cluster(3, cpu=True)
        a, value, _ = best_split(g, c)
        assert ThroughputModel(g, c).max_load(a) == pytest.approx(value, rel=1e-9)
        brute = min(ThroughputModel(g, c).max_load_batch(np.array(list(itertools.product(range(4), repeat=9)))))
        assert brute <= value + 1e-12  # a contiguous split is one of all placements

    def test_memory_forces_a_split(self):
        """Everything fits one GPU's time budget best, but not its memory."""
        g = _chain([1.0, 1.0, 1.0], transfer=5.0, params=[60, 60, 60])
        a, value, _ = best_split(g, _cluster(2, memory=130))
        held = np.bincount(a, weights=[60, 60, 60], minlength=2)
        assert held.max() <= 130
        assert value == 7.0  # {0,1} + send 5 = 7 | {2} + receive 5 = 6

    def test_no_split_fits_is_placed_and_said(self):
        """As every placer does: place anyway, mark the estimate exceeded, the simulator says oom."""
        g = _chain([1.0, 1.0], params=[200, 10])
        assert best_split(g, _cluster(2, memory=100))[0] is None
        p = place("pipeline_dp", g, _cluster(2, memory=100), objective="throughput")
        assert p.meta["memory_estimate_exceeded"] is True and p.oom

    def test_colocation_is_kept(self):
        g = OpGraph("co", [Op("a", "X", [], cost={"gpu": 4.0}, colocation="k"),
                           Op("b", "X", ["a"], cost={"gpu": 4.0}),
                           Op("c", "X", ["b"], cost={"gpu": 4.0}, colocation="k")])
        a, value, info = best_split(g, _cluster(3))
        assert info["units"] == 1  # a, c colocated around b: one cycle, fused
        assert value == 12.0
        p = place("pipeline_dp", g, _cluster(3), objective="throughput")
        assert p.devices["a"] == p.devices["c"] != p.devices["b"]  # local search leaves contiguity
        assert p.max_load == 8.0

    def test_backward_ops_follow_their_forward_op(self):
        """f1 -> f2 -> b2 -> b1, classes {f1, b1} and {f2, b2}: two units, split in two."""
        ops = [Op("f1", "Forward", [], cost={"gpu": 1.0}, colocation="1"),
               Op("f2", "Forward", ["f1"], cost={"gpu": 2.0}, colocation="2"),
               Op("b2", "Backward", ["f2"], cost={"gpu": 4.0}, colocation="2"),
               Op("b1", "Backward", ["b2", "f1"], cost={"gpu": 3.0}, colocation="1")]
        g = OpGraph("train", ops)
        dag = build_units(g)
        assert dag.num_units == 2 and dag.edges.tolist() == [[0, 1]]
        a, value, _ = best_split(g, _cluster(2))
        assert a[0] == a[3] != a[1] == a[2]
        assert value == 6.0

    def test_falls_back_to_linear_orders(self):
        """Two parallel chains have many ideals; with a tiny limit the DP splits topological orders."""
        ops = [Op("s", "X", [], cost={"gpu": 1.0})]
        for br in "xy":
            for k in range(4):
                ops.append(Op(f"{br}{k}", "X", [f"{br}{k - 1}" if k else "s"], cost={"gpu": 1.0}))
        g = OpGraph("wide", ops)
        with pytest.raises(TooManyIdeals):
            enumerate_ideals(build_units(g), 10)
        assert len(enumerate_ideals(build_units(g), 1000)) == 1 + 25
        a, value, info = best_split(g, _cluster(3), max_ideals=10)
        assert info["search"] == "orders"
        assert value == 3.0
        assert len(chain_ideals(np.arange(9))) == 10


class TestRegistered:
    def test_throughput_fills_max_load(self):
        g, c = _chain([1.0, 2.0, 3.0, 4.0], 0.5), _cluster(2)
        p = place("pipeline_dp", g, c, objective="throughput")
        assert p.meta["pipeline_dp"]["dp_max_load"] == pytest.approx(6.5)  # {0,1,2} + send | {3} + receive
        # local search pairs the ends: {0,3} = 5 + send + receive, {1,2} = 5 + receive + send
        assert p.max_load == pytest.approx(6.0)
        assert p.step_time > 0 and "ignored_objective" not in p.meta

    def test_step_time_objective_is_ignored_and_said(self):
        p = place("pipeline_dp", _chain([1.0, 2.0]), _cluster(2))
        assert p.meta["ignored_objective"] == "step_time" and p.max_load is None

    def test_the_search_is_bounded_by_work_not_time(self):
        """Kicks and moves bound the search; a cap that does not fire changes nothing and is not mentioned."""
        g, c = layered_graph(150, seed=3), _cluster(3)
        p = place("pipeline_dp", g, c, objective="throughput")
        q = place("pipeline_dp", g, c, objective="throughput", time_limit=1e6)
        assert p.devices == q.devices and "time_capped" not in p.meta
        fewer = place("pipeline_dp", g, c, objective="throughput", kicks=0, search_moves=1)
        assert fewer.max_load >= p.max_load

    def test_a_fired_time_cap_keeps_the_split_and_says_so(self):
        """With no time the search makes no move (the DP's split keeps its max load 12, where a descent finds 8,
        as in test_colocation_is_kept), and the placement is marked as the list schedulers mark theirs."""
        g = OpGraph("co", [Op("a", "X", [], cost={"gpu": 4.0}, colocation="k"),
                           Op("b", "X", ["a"], cost={"gpu": 4.0}),
                           Op("c", "X", ["b"], cost={"gpu": 4.0}, colocation="k")])
        p = place("pipeline_dp", g, _cluster(3), objective="throughput", time_limit=0.0)
        assert p.meta["pipeline_dp"]["local_search"]["dp"] == 12.0
        assert p.meta["time_capped"] is True and p.meta["time_limit"] == 0.0 and "capped_ops" not in p.meta

    def test_unknown_option(self):
        with pytest.raises(PlacerError, match="unknown option"):
            place("pipeline_dp", _chain([1.0]), _cluster(2), objective="throughput", depth=3)


@pytest.mark.skipif(not DATASET.is_dir(), reason="the public datasets are not beside the clone (../shared/datasets)")
def test_matches_or_beats_the_published_dp_on_bert24():
    from placer.importers import msr

    path = DATASET / "throughput-inputs/LayerGraphs/bert24_inference.json"
    g, c = msr.load(path), msr.load_cluster(path)
    p = place("pipeline_dp", g, c, objective="throughput")
    assert p.meta["pipeline_dp"]["dp_max_load"] == pytest.approx(17.78990625, rel=1e-9)
    assert p.max_load <= 17.78990625 * (1 + 1e-12)


@pytest.mark.parametrize("option", [{"max_ideals": 0}, {"pair_budget": "many"}, {"search_moves": 0},
                                    {"kicks": -1}, {"time_limit": -1}, {"time_limit": float("inf")},
                                    {"seed": 1.5}, {"local_search": "false"}])
def test_bad_option_values(option):
    with pytest.raises(PlacerError, match=f"option {next(iter(option))} must be"):
        place("pipeline_dp", _chain([1.0]), _cluster(2), objective="throughput", **option)


def test_on_a_topology_pieces_that_talk_swap_behind_one_switch():
    """a on g0 sends 1 GB to b on g2, across the 1 GB/s uplinks (1 s charged to each): swapping g1 and g2's
    pieces puts them behind one switch, over 10 GB/s ports, and lowers the max load."""
    g = OpGraph("pair", [Op("a", "X", cost={"gpu": 0.01}, output_bytes=GB), Op("b", "X", ["a"], cost={"gpu": 0.01}),
                         Op("c", "X", cost={"gpu": 0.01}), Op("d", "X", cost={"gpu": 0.01})])
    c = two_switches()
    model = ThroughputModel(g, c)
    info = {}
    a = _route_swap(g, c, model, np.array([0, 2, 1, 3]), info)
    assert {int(a[0]) // 2} == {int(a[1]) // 2}
    assert info["route_swap"]["max_load_after"] < info["route_swap"]["max_load_before"] == pytest.approx(1.01)
