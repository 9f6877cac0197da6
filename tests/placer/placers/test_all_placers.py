"""Properties every heuristic placer must have: colocation, memory, the obvious split."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from placer.cluster import Cluster, Device, Link
from placer.graph import Op, OpGraph
from placer.graph_io import load_graph
from placer.placers import registry
from placer.synthetic import layered_graph

HEURISTICS = registry.names(heuristic_only=True)
PARTITIONING = ["expert", "metis", "heft", "cpop", "m_etf", "m_sct"]
MEMORY_AWARE = ["round_robin", "expert", "metis", "heft", "cpop", "m_topo", "m_etf", "m_sct"]
GIB = 2.0**30
GRAPHS_DIR = Path(__file__).resolve().parents[3] / "graphs"


def gpus(n: int, memory: float = 16 * GIB, bandwidth: float = 12e9) -> Cluster:
    devices = [Device(f"/device:GPU:{i}", "gpu", 14e12, 9e11, memory) for i in range(n)]
    return Cluster(f"{n}x", devices, default_link=Link(bandwidth, 1e-5))


def two_chains(length: int = 10, cost: float = 1e-3, out: float = 1e6, params: float = 0.0) -> OpGraph:
    ops = []
    for chain in "ab":
        for k in range(length):
            ops.append(Op(f"{chain}{k}", "MatMul", [f"{chain}{k - 1}"] if k else [], output_bytes=out,
                          param_bytes=params, cost={"gpu": cost, "cpu": 10 * cost}))
    return OpGraph("two-chains", ops)


def with_colocation(graph: OpGraph, every: int = 7) -> OpGraph:
    """The same graph with colocation groups tying far-apart ops (a variable, its read, its update)."""
    ops = list(graph.ops)
    n = len(ops)
    for k, i in enumerate(range(0, n // 2, every)):
        j = n - 1 - i
        for idx in (i, (i + j) // 2, j):
            ops[idx] = replace(ops[idx], colocation=f"var{k}")
    return OpGraph(graph.name + "-coloc", ops)


def assert_colocation_respected(graph: OpGraph, placement) -> None:
    for key, members in graph.colocation_groups().items():
        devices = {placement.devices[graph.ops[i].name] for i in members}
        assert len(devices) == 1, f"group {key!r} split over {devices}"


@pytest.mark.parametrize("method", PARTITIONING)
def test_two_equal_chains_split_perfectly(method):
    """Two independent equal chains, two equal devices: one chain each, no transfer, the lower bound."""
    g, c = two_chains(), gpus(2)
    p = registry.place(method, g, c)
    a = {p.devices[f"a{k}"] for k in range(10)}
    b = {p.devices[f"b{k}"] for k in range(10)}
    assert len(a) == 1 and len(b) == 1 and a != b
    assert p.step_time == pytest.approx(p.lower_bound)


@pytest.mark.parametrize("method", MEMORY_AWARE)
def test_graph_that_fits_only_when_split_is_split(method):
    """20 GiB of weights on two 15 GiB GPUs: no placer may put it all on one, and none runs out."""
    g, c = two_chains(params=GIB), gpus(2, memory=15 * GIB)
    p = registry.place(method, g, c)
    assert len(set(p.devices.values())) == 2
    assert not p.oom
    assert p.meta["memory_estimate_exceeded"] is False


def test_single_says_it_does_not_fit():
    g, c = two_chains(params=GIB), gpus(2, memory=15 * GIB)
    p = registry.place("single", g, c)
    assert p.oom and p.meta["fits"] is False


@pytest.mark.parametrize("method", MEMORY_AWARE)
def test_graph_too_big_for_the_cluster_is_marked_oom(method):
    """40 GiB of weights on 2 x 15 GiB: placed anyway, the estimate says so, the simulator says oom."""
    g, c = two_chains(params=2 * GIB), gpus(2, memory=15 * GIB)
    p = registry.place(method, g, c)
    assert p.oom
    assert p.meta["memory_estimate_exceeded"] is True


@pytest.mark.parametrize("method", HEURISTICS)
@pytest.mark.parametrize("cluster", ["2gpu", "4gpu"])
def test_colocation_respected_on_synthetic_graphs(method, cluster):
    from placer import presets

    g = with_colocation(layered_graph(300, seed=5))
    assert len(g.colocation_groups()) > 10
    p = registry.place(method, g, presets.get(cluster))
    assert_colocation_respected(g, p)
    assert p.step_time >= p.lower_bound * (1 - 1e-9)


@pytest.mark.parametrize("method", HEURISTICS)
def test_every_op_placed_on_a_cluster_device(method):
    from placer import presets

    g, c = layered_graph(120, seed=9), presets.get("8gpu")
    p = registry.place(method, g, c)
    assert set(p.devices) == set(g.names)
    assert set(p.devices.values()) <= set(c.device_names)
    assert p.meta["place_seconds"] >= 0


@pytest.mark.parametrize("method", HEURISTICS)
def test_single_device_cluster(method):
    from placer import presets

    g = layered_graph(50, seed=2)
    p = registry.place(method, g, presets.get("local:1"))
    assert set(p.devices.values()) == {"/device:CPU:0"}


def benchmark_graphs() -> list[Path]:
    return sorted(GRAPHS_DIR.glob("*.json.gz")) if GRAPHS_DIR.is_dir() else []


@pytest.mark.parametrize("path", benchmark_graphs(), ids=lambda p: p.name)
def test_colocation_respected_on_benchmark_graphs(path):
    """Every placer keeps every colocation group of every graph in graphs/ together."""
    from placer import presets

    from placer.errors import PlacerError

    g = load_graph(path)
    c = presets.get("2gpu")
    for method in HEURISTICS:
        # pipeline_dp's search moves whole units either way; a short one keeps this test quick
        options = {"search_moves": 50, "kicks": 5} if method == "pipeline_dp" else {}
        try:
            p = registry.place(method, g, c, **options)
        except PlacerError:  # a placer may refuse a graph it cannot place; that splits nothing
            continue
        assert_colocation_respected(g, p)


def test_placers_are_deterministic():
    """Same input, same answer, however busy the machine: every bound is on work. Only past a time cap
    (`placer.placers.time_cap`, 60 s: a machine that gives this graph next to no CPU) may it differ, as said."""
    from placer import presets

    g, c = layered_graph(200, seed=4), presets.get("4gpu")
    for method in HEURISTICS:
        a, b = registry.place(method, g, c), registry.place(method, g, c)
        if a.meta.get("time_capped") or b.meta.get("time_capped"):
            continue
        assert a.devices == b.devices, method


def test_place_answers_a_new_placement():
    """registry.place leaves the placer's own answer as it was: timing and scores go on a new placement."""
    from placer.placers.single import place_single

    answers = []

    @registry.register("test_fresh", description="single, keeping its answer", heuristic=False)
    def fresh(graph, cluster):
        answers.append(place_single(graph, cluster))
        return answers[-1]

    try:
        p = registry.place("test_fresh", two_chains(), gpus(2))
    finally:
        registry._REGISTRY.pop("test_fresh")
    (own,) = answers
    assert p is not own and own.step_time is None and "place_seconds" not in own.meta
    assert p.step_time > 0 and "place_seconds" in p.meta


def test_unknown_option_is_rejected():
    from placer.errors import PlacerError

    with pytest.raises(PlacerError, match="unknown option"):
        registry.place("heft", two_chains(), gpus(2), bogus=1)


def test_no_placer_leaves_an_op_unplaced_on_a_wide_graph():
    """Many roots and one sink (the shape of a training step's constants) places fine."""
    ops = [Op(f"c{i}", "Const", output_bytes=1e3, cost={"gpu": 1e-6}) for i in range(50)]
    ops.append(Op("sum", "AddN", [f"c{i}" for i in range(50)], cost={"gpu": 1e-5}))
    g = OpGraph("fan-in", ops)
    for method in HEURISTICS:
        p = registry.place(method, g, gpus(4))
        assert len(p.devices) == 51
        assert np.isfinite(p.step_time)
