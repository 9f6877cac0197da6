"""Robustness worlds: placements made once, rescored where the model's numbers are off."""

import json

import numpy as np
import pytest

from placer import presets
from placer.cluster import Cluster, Device, Link
from placer.graph import Op, OpGraph
from placer.placers import registry
from placer.placers.best import rank
from placer.placers.robustness import perturbed_worlds, random_world, rescore, robustness, scale_links
from placer.synthetic import layered_graph

DEV = {"peak_flops": 1e13, "memory_bandwidth": 9e11, "memory_bytes": 1.6e10}

TOPO = {
    "name": "box",
    "devices": [{"name": n, "kind": k, **DEV} for n, k in (("cpu", "cpu"), ("g0", "gpu"), ("g1", "gpu"))],
    "topology": {
        "switches": [{"name": "sw", "kind": "pcie-switch"}],
        "links": [
            {"between": ["cpu", "sw"], "bandwidth": 2e10, "latency": 1e-6},
            {"between": ["g0", "sw"], "bandwidth": 1e10, "latency": 2e-6},
            {"between": ["g1", "sw"], "bandwidth": 1e10, "latency": 2e-6},
        ],
    },
}


def two_gpus(latency=0.0) -> Cluster:
    dev = dict(peak_flops=1e13, memory_bandwidth=9e11, memory_bytes=1.6e10)
    return Cluster("pair", [Device("g0", "gpu", **dev), Device("g1", "gpu", **dev)],
                   default_link=Link(1e9, latency))


def worlds(graph, cluster, n=1, seed=0):
    return {w.name: w for w in perturbed_worlds(graph, cluster, n, seed)}


def test_world_names_and_count():
    g = layered_graph(30, seed=1)
    names = list(worlds(g, presets.get("2gpu"), n=2))
    assert names == ["nominal", "cost-sigma0.2#1", "cost-sigma0.2#2", "cost-sigma0.5#1", "cost-sigma0.5#2",
                     "bandwidth-x0.5", "bandwidth-x2", "latency-x5", "gpu-x2"]


def test_half_bandwidth_doubles_a_pure_transfer():
    """a on g0 sends 1 GB to b on g1 over a 1 GB/s link with no latency; the ops take no time."""
    g = OpGraph("xfer", [Op("a", "X", output_bytes=1e9, cost={"gpu": 0.0}),
                         Op("b", "X", ["a"], cost={"gpu": 0.0})])
    w = list(perturbed_worlds(g, two_gpus(), 1))
    steps, ooms = rescore(w, np.array([[0, 1]]))
    by = {x.name: s for x, s in zip(w, steps[:, 0])}
    assert by["nominal"] == pytest.approx(1.0)
    assert by["bandwidth-x0.5"] == pytest.approx(2.0)
    assert by["bandwidth-x2"] == pytest.approx(0.5)
    assert by["gpu-x2"] == pytest.approx(1.0)  # no compute to speed up
    assert not ooms.any()


def test_latency_world_and_profiled_transfer_time():
    g = OpGraph("xfer", [Op("a", "X", output_bytes=1e9, cost={"gpu": 0.0}),
                         Op("b", "X", ["a"], cost={"gpu": 0.0})])
    w = worlds(g, two_gpus(latency=0.1))
    steps, _ = rescore([w["nominal"], w["latency-x5"]], np.array([[0, 1]]))
    assert steps[:, 0] == pytest.approx([1.1, 1.5])
    profiled = OpGraph("p", [Op("a", "X", cost={"gpu": 0.0}, transfer_time=0.3),
                             Op("b", "X", ["a"], cost={"gpu": 0.0})])
    w = worlds(profiled, two_gpus(latency=0.1))
    steps, _ = rescore([w["nominal"], w["bandwidth-x0.5"], w["latency-x5"]], np.array([[0, 1]]))
    assert steps[:, 0] == pytest.approx([0.3, 0.6, 0.3])
    assert profiled.ops[0].transfer_time == 0.3  # the graph given is left as it was


def test_gpu_world_halves_gpu_times_and_doubles_peak_flops():
    g = layered_graph(40, seed=2)
    c = presets.get("2gpu")
    w = worlds(g, c)
    gpu = np.array([d.kind == "gpu" for d in c.devices])
    nominal, fast = w["nominal"].times, w["gpu-x2"].times
    assert fast[:, gpu] == pytest.approx(nominal[:, gpu] / 2)
    assert fast[:, ~gpu] == pytest.approx(nominal[:, ~gpu])
    for d, e in zip(c.devices, w["gpu-x2"].cluster.devices):
        assert e.peak_flops == (2 * d.peak_flops if d.kind == "gpu" else d.peak_flops)
    assert c.devices[gpu.argmax()].peak_flops == presets.get("2gpu").devices[gpu.argmax()].peak_flops


def test_cost_worlds_repeat_with_their_seed():
    g = layered_graph(50, seed=3)
    c = presets.get("2gpu")
    a, b, other = worlds(g, c, 2, seed=7), worlds(g, c, 2, seed=7), worlds(g, c, 2, seed=8)
    for name in ("cost-sigma0.2#1", "cost-sigma0.2#2", "cost-sigma0.5#2"):
        assert np.array_equal(a[name].times, b[name].times)
        assert not np.array_equal(a[name].times, other[name].times)
        ratio = a[name].times / a["nominal"].times
        assert np.allclose(ratio, ratio[:, :1])  # one factor per op, every device alike
    assert not np.array_equal(a["cost-sigma0.2#1"].times, a["cost-sigma0.2#2"].times)
    spread = np.log(a["cost-sigma0.5#1"].times / a["nominal"].times)[:, 0].std()
    assert 0.3 < spread < 0.7


def test_topology_links_are_scaled():
    c = Cluster.from_dict(json.loads(json.dumps(TOPO)))
    bw, lat = c.link_matrices()
    w = worlds(layered_graph(20, seed=1), c)
    for name, bw_f, lat_f in (("bandwidth-x0.5", 0.5, 1), ("bandwidth-x2", 2, 1), ("latency-x5", 1, 5)):
        wc = w[name].cluster
        assert wc.topology is not None and not wc.links and wc.default_link is None
        b2, l2 = wc.link_matrices()
        off = ~np.eye(len(c), dtype=bool)
        assert b2[off] == pytest.approx(bw[off] * bw_f)
        assert l2 == pytest.approx(lat * lat_f)
    assert c.topology.links[1].bandwidth == 1e10  # the cluster given is left as it was


def test_flat_links_are_scaled():
    c = presets.get("4gpu")
    s = scale_links(c, bandwidth=0.5, latency=5)
    bw, lat = c.link_matrices()
    b2, l2 = s.link_matrices()
    off = ~np.eye(len(c), dtype=bool)
    assert b2[off] == pytest.approx(bw[off] * 0.5)
    assert l2 == pytest.approx(lat * 5)
    assert c.default_link == presets.get("4gpu").default_link  # the cluster given is left as it was


def test_nominal_best_heuristic_has_ratio_one_in_the_nominal_world():
    g = layered_graph(120, seed=4)
    c = presets.get("4gpu")
    methods = ["single", "round_robin", "expert", "heft", "m_etf"]
    placed = {m: registry.place(m, g, c) for m in methods}
    rows = robustness(g, c, {m: p.assignment(g, c) for m, p in placed.items()}, 2, seed=1)
    assert [r["method"] for r in rows] == methods
    best = methods[rank([placed[m].step_time for m in methods], [placed[m].oom for m in methods])[0]]
    for r in rows:
        assert r["worlds"] == 9 and set(r["ratios"]) == set(worlds(g, c, 2))
        assert r["ratios"]["nominal"] == pytest.approx(placed[r["method"]].step_time / placed[best].step_time,
                                                       rel=1e-12)
        assert r["worst_ratio"] == max(r["ratios"].values()) == r["ratios"][r["worst_world"]]
        assert min(r["ratios"].values()) <= r["geomean_ratio"] <= r["worst_ratio"]
    assert next(r for r in rows if r["method"] == best)["ratios"]["nominal"] == 1.0
    # in every world some heuristic has ratio 1
    for name in rows[0]["ratios"]:
        assert min(r["ratios"][name] for r in rows) == pytest.approx(1.0)


def test_without_a_heuristic_the_ratios_are_none():
    g = layered_graph(30, seed=5)
    c = presets.get("2gpu")
    rows = robustness(g, c, {"x": np.zeros(len(g), dtype=np.int64)}, 1, heuristics=[])
    assert rows[0]["geomean_ratio"] is None and rows[0]["worst_world"] is None and rows[0]["worlds"] == 7


@pytest.mark.parametrize("n", [-1, 101, 1.5, True])
def test_n_is_checked(n):
    with pytest.raises(ValueError, match="an integer from 0 to 100"):
        next(perturbed_worlds(layered_graph(10), presets.get("2gpu"), n))


def test_a_random_world_scales_costs_links_and_gpus_around_the_nominal_one():
    graph = layered_graph(40, seed=3)
    cluster = presets.get("4gpu")
    times = worlds(graph, cluster)["nominal"].times
    w = random_world(graph, cluster, times, np.random.default_rng(5), 0.3)
    again = random_world(graph, cluster, times, np.random.default_rng(5), 0.3)
    np.testing.assert_array_equal(w.times, again.times)
    gpu = np.array([d.kind == "gpu" for d in cluster.devices])
    ratio = w.times / times
    # one factor per op, the GPUs' columns divided by one more factor
    np.testing.assert_allclose(ratio[:, ~gpu], ratio[:, ~gpu][:, :1].repeat((~gpu).sum(), axis=1))
    gpu_speed = ratio[:, ~gpu][:, 0] / ratio[:, gpu][:, 0]
    np.testing.assert_allclose(gpu_speed, gpu_speed[0])
    bandwidth = {l.bandwidth / n.bandwidth for l, n in zip(w.cluster.topology.links, cluster.topology.links)}
    latency = {l.latency / n.latency for l, n in zip(w.cluster.topology.links, cluster.topology.links) if n.latency > 0}
    assert len({round(b, 9) for b in bandwidth}) == 1 and len({round(x, 9) for x in latency}) == 1
    assert [d.memory_bytes for d in w.cluster.devices] == [d.memory_bytes for d in cluster.devices]


def test_sigma_zero_is_the_nominal_world_and_a_bad_sigma_is_refused():
    graph, cluster = layered_graph(20, seed=1), two_gpus(latency=1e-5)
    times = worlds(graph, cluster)["nominal"].times
    w = random_world(graph, cluster, times, np.random.default_rng(0), 0.0)
    np.testing.assert_array_equal(w.times, times)
    assert w.cluster.default_link == cluster.default_link
    with pytest.raises(ValueError, match="sigma"):
        random_world(graph, cluster, times, np.random.default_rng(0), -0.1)
