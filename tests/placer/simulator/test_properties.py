"""Properties that hold for every graph and placement (hypothesis)."""

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placer import presets
from placer.cluster import Cluster
from placer.graph import Op, OpGraph
from placer.simulator import Simulator
from placer.simulator.reference import simulate_reference
from placer.synthetic import layered_graph


@st.composite
def graphs_and_placements(draw, max_ops=25, costs=(0.0, 1e-4, 2.5e-4, 1e-3, 3e-3), types=("T",)):
    """A random DAG with random sizes and costs, and a placement on 4gpu.

    Inputs come from earlier ops; half the graphs then list their ops shuffled, out of topological order
    (the kernel renumbers ops by rank, which must change nothing)."""
    n = draw(st.integers(1, max_ops))
    ops = []
    for i in range(n):
        inputs = draw(st.lists(st.integers(0, i - 1), max_size=3, unique=True)) if i else []
        cost_gpu = draw(st.sampled_from(costs))
        ops.append(Op(
            f"op{i}", draw(st.sampled_from(types)), [f"op{j}" for j in inputs],
            output_bytes=draw(st.sampled_from([0.0, 1e3, 1e6, 4e7])),
            param_bytes=draw(st.sampled_from([0.0, 1e6])),
            cost={"gpu": cost_gpu, "cpu": 4 * cost_gpu},
        ))
    if draw(st.booleans()):
        ops = [ops[i] for i in draw(st.permutations(range(n)))]
    g = OpGraph("h", ops)
    placement = np.array(draw(st.lists(st.integers(0, 4), min_size=n, max_size=n)))
    return g, placement


@st.composite
def topologies(draw):
    """4gpu's five devices on a random topology: each device on a random switch, the switches chained,
    and random extra links (device-device, device-switch, switch-switch); bandwidths from NVLink-like
    to slow, latencies from none to large, so shared link directions and multi-hop routes matter."""
    base = presets.get("4gpu")
    names = base.device_names
    n_sw = draw(st.integers(1, 4))
    nodes = names + [f"sw{i}" for i in range(n_sw)]
    pairs = {frozenset((d, f"sw{draw(st.integers(0, n_sw - 1))}")) for d in names}
    pairs |= {frozenset((f"sw{i - 1}", f"sw{i}")) for i in range(1, n_sw)}
    for _ in range(draw(st.integers(0, 5))):
        a, b = draw(st.sampled_from(nodes)), draw(st.sampled_from(nodes))
        if a != b:
            pairs.add(frozenset((a, b)))
    links = [{"between": sorted(p), "bandwidth": draw(st.sampled_from([1e9, 1.2e10, 2.5e10, 3e11])),
              "latency": draw(st.sampled_from([0.0, 1e-6, 1e-5, 1e-3]))} for p in sorted(pairs, key=sorted)]
    return Cluster.from_dict({"name": "random-topology", "devices": [d.to_dict() for d in base.devices],
                              "topology": {"switches": [{"name": f"sw{i}"} for i in range(n_sw)], "links": links}})


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(graphs_and_placements())
def test_step_time_is_at_least_the_lower_bound(case):
    g, a = case
    sim = Simulator(g, presets.get("4gpu"))
    assert sim.run(a).step_time >= sim.lower_bound * (1 - 1e-12)


@SETTINGS
@given(graphs_and_placements(), st.integers(0, 4))
def test_one_device_equals_the_sum_of_costs(case, device):
    g, _ = case
    sim = Simulator(g, presets.get("4gpu"))
    res = sim.run(np.full(len(g), device))
    assert res.step_time == pytest.approx(sim.times[:, device].sum(), rel=1e-12, abs=1e-15)
    assert res.bytes_moved == 0.0


def assert_kernel_matches_reference(sim: Simulator, a) -> None:
    """The compiled kernel's step time, busy times and bytes moved are the reference simulator's."""
    res = sim.run(a)
    step, busy, peak, moved = simulate_reference(sim, a)
    assert res.step_time == pytest.approx(step, rel=1e-12, abs=1e-15)
    np.testing.assert_allclose(res.busy, busy, rtol=1e-12)
    assert res.bytes_moved == pytest.approx(moved)


@SETTINGS
@given(graphs_and_placements())
def test_compiled_kernel_matches_the_reference(case):
    g, a = case
    assert_kernel_matches_reference(Simulator(g, presets.get("4gpu")), a)


@SETTINGS
@given(graphs_and_placements(costs=(1e-4, 2.5e-4, 1e-3, 3e-3)))
def test_online_memory_matches_the_interval_reference(case):
    """The kernel counts memory as it runs; the reference sweeps lifetimes afterwards.

    They agree whenever ops take time; with zero-time ops the kernel still
    runs ops one after another (see test_core.TestMemory), which lifetimes
    of zero length cannot express.
    """
    g, a = case
    sim = Simulator(g, presets.get("4gpu"))
    np.testing.assert_allclose(sim.run(a).peak_memory, simulate_reference(sim, a)[2], rtol=1e-12)


def fusing_4gpu() -> Cluster:
    """4gpu with XLA-style fusion on its GPUs: fused and relabelling ops' outputs hold no memory there."""
    base = presets.get("4gpu").to_dict()
    for dev in base["devices"]:
        dev["fusion"] = dev["kind"] == "gpu"
    return Cluster.from_dict(base)


@SETTINGS
@given(graphs_and_placements(costs=(1e-4, 2.5e-4, 1e-3), types=("T", "Mul", "Relu", "Reshape")))
def test_online_memory_matches_the_interval_reference_with_fusion(case):
    """Outputs that hold no memory where they are produced, but do where they are received, agree too."""
    g, a = case
    sim = Simulator(g, fusing_4gpu())
    np.testing.assert_allclose(sim.run(a).peak_memory, simulate_reference(sim, a)[2], rtol=1e-12)
    assert_kernel_matches_reference(sim, a)


@SETTINGS
@given(st.lists(graphs_and_placements(max_ops=12), min_size=1, max_size=1), st.integers(1, 6), st.integers(0, 99))
def test_batch_equals_one_by_one(cases, k, seed):
    g, _ = cases[0]
    sim = Simulator(g, presets.get("4gpu"))
    batch = np.random.default_rng(seed).integers(0, 5, size=(k, len(g)))
    out = sim.run_batch(batch)
    for i in range(k):
        one = sim.run(batch[i])
        assert out.step_time[i] == one.step_time
        np.testing.assert_array_equal(out.peak_memory[i], one.peak_memory)
        assert out.oom[i] == one.oom


def test_deterministic_on_a_larger_graph():
    g = layered_graph(3000, seed=3)
    sim = Simulator(g, presets.get("8gpu"))
    a = np.random.default_rng(0).integers(0, 9, len(g))
    first, second = sim.run(a), sim.run(a)
    assert first.step_time == second.step_time
    np.testing.assert_array_equal(first.start, second.start)


def test_reference_agrees_on_a_layered_graph():
    g = layered_graph(400, seed=5)
    sim = Simulator(g, presets.get("4gpu"))
    a = np.random.default_rng(1).integers(0, 5, len(g))
    assert sim.run(a).step_time == pytest.approx(simulate_reference(sim, a)[0], rel=1e-12)


@SETTINGS
@given(graphs_and_placements(), topologies())
def test_compiled_kernel_matches_the_reference_on_topologies(case, cluster):
    g, a = case
    assert_kernel_matches_reference(Simulator(g, cluster), a)


@SETTINGS
@given(graphs_and_placements(costs=(1e-4, 2.5e-4, 1e-3, 3e-3)), topologies())
def test_online_memory_matches_the_interval_reference_on_topologies(case, cluster):
    g, a = case
    sim = Simulator(g, cluster)
    np.testing.assert_allclose(sim.run(a).peak_memory, simulate_reference(sim, a)[2], rtol=1e-12)


@SETTINGS
@given(graphs_and_placements(), topologies())
def test_step_time_is_at_least_the_lower_bound_on_topologies(case, cluster):
    g, a = case
    sim = Simulator(g, cluster)
    assert sim.run(a).step_time >= sim.lower_bound * (1 - 1e-12)


@SETTINGS
@given(st.lists(graphs_and_placements(max_ops=12), min_size=1, max_size=1), topologies(), st.integers(1, 4),
       st.integers(0, 99))
def test_batch_equals_one_by_one_on_topologies(cases, cluster, k, seed):
    g, _ = cases[0]
    sim = Simulator(g, cluster)
    batch = np.random.default_rng(seed).integers(0, 5, size=(k, len(g)))
    out = sim.run_batch(batch)
    for i in range(k):
        assert out.step_time[i] == sim.run(batch[i]).step_time



@SETTINGS
@given(st.lists(graphs_and_placements(max_ops=20), min_size=1, max_size=1), topologies(), st.integers(2, 8),
       st.integers(0, 99), st.sampled_from([0, 1, 2]))
def test_a_cutoff_stops_only_steps_that_end_after_it(cases, cluster, k, seed, threads):
    """Below the cutoff a step is simulated as without it; above it, it may come back ``inf``; one that ends
    exactly at the cutoff is never stopped (so the fastest of a batch stays the same). Also on a shared pool."""
    g, _ = cases[0]
    if threads:
        cluster = dataclasses.replace(cluster, shared_threads=threads)
    sim = Simulator(g, cluster)
    batch = np.random.default_rng(seed).integers(0, len(cluster), size=(k, len(g)))
    full = sim.run_batch(batch)
    cutoff = float(np.sort(full.step_time)[len(full.step_time) // 2])
    cut = sim.run_batch(batch, cutoff=cutoff)
    kept = full.step_time <= cutoff
    np.testing.assert_array_equal(cut.step_time[kept], full.step_time[kept])
    np.testing.assert_array_equal(cut.oom[kept], full.oom[kept])
    stopped = np.isinf(cut.step_time)
    assert not (stopped & kept).any()
    np.testing.assert_array_equal(cut.step_time[~stopped], full.step_time[~stopped])


def test_a_cutoff_stops_most_slow_placements_early():
    """Random placements of a layered graph against the fastest of them: most are stopped."""
    g = layered_graph(2000, seed=4)
    sim = Simulator(g, presets.get("4gpu"))
    batch = np.random.default_rng(2).integers(0, 4, size=(16, len(g)))
    full = sim.run_batch(batch)
    cut = sim.run_batch(batch, cutoff=float(full.step_time.min()))
    assert np.isinf(cut.step_time).sum() >= 12
    assert cut.step_time.min() == full.step_time.min()
