"""Features read the same way whatever the graph's size or the number of devices."""

from pathlib import Path

import numpy as np

from placer import presets
from placer.cluster import Cluster, Link
from placer.cost_model import op_time_matrix
from placer.graph_io import load_graph
from placer.rl.features import (CATEGORY_NAMES, NUM_DEVICE_FEATURES, NUM_GROUP_FEATURES, NUM_LOAD_FEATURES,
                                DecodeContext, decode_context, device_features, finish_delay, group_features,
                                load_features, op_category)
from placer.grouping import Grouping, group_graph
from placer.synthetic import layered_graph
from tests.placer.helpers import host_with_switch

GRAPHS = Path(__file__).resolve().parents[3] / "graphs"


def _features(n, cluster="2gpu", groups=40):
    g, c = layered_graph(n, seed=4), presets.get(cluster)
    t = op_time_matrix(g, c)
    return group_features(g, c, group_graph(g, c, groups, t), t)


def test_shape_and_finite():
    f = _features(300)
    assert f.shape == (40, NUM_GROUP_FEATURES) and f.dtype == np.float32
    assert np.isfinite(f).all()


def test_scale_does_not_grow_with_graph_size():
    """A 10x larger graph gives features of the same magnitude (shares, not counts)."""
    small, large = _features(400), _features(4000)
    assert np.abs(large.mean(axis=0) - small.mean(axis=0)).max() < 0.5
    assert np.abs(large).max() < 10


def test_histogram_rows_are_shares():
    f = _features(300)
    np.testing.assert_allclose(f[:, :len(CATEGORY_NAMES)].sum(axis=1), 1.0, rtol=1e-5)


def test_op_categories():
    assert CATEGORY_NAMES[op_category("Conv2DBackpropInput")] == "gradient"
    assert CATEGORY_NAMES[op_category("ResourceApplyAdam")] == "optimizer"
    assert CATEGORY_NAMES[op_category("MatMul")] == "matmul"
    assert CATEGORY_NAMES[op_category("SomethingNew")] == "other"


def test_device_features_any_cluster_size():
    for name in ("2gpu", "8gpu-nvlink", "local:3"):
        c = presets.get(name)
        f = device_features(c)
        assert f.shape == (len(c), NUM_DEVICE_FEATURES) and np.isfinite(f).all()


def test_decode_context_is_shares():
    g, c = layered_graph(400, seed=4), presets.get("4gpu")
    t = op_time_matrix(g, c)
    grouping = group_graph(g, c, 30, t)
    ctx = decode_context(g, c, grouping, t)
    G = grouping.num_groups
    assert ctx.inflow.shape == (G, G) and ctx.compute.shape == (G,) and ctx.capacity.shape == (len(c),)
    received = ctx.inflow.sum(axis=0)
    assert np.allclose(received[received > 0], 1.0) and (received > 0).sum() > G // 2
    assert np.all(np.diag(ctx.inflow) == 0)  # a group's own tensors are not inputs
    assert np.isclose(ctx.compute.sum(), 1.0) and ctx.capacity.min() == 1.0 and np.all(ctx.memory >= 0)
    assert ctx.slowness.shape == (G, len(c)) and np.all(ctx.slowness.min(axis=1) == 0)  # 0 on its fastest
    assert np.all((ctx.slowness >= 0) & (ctx.slowness <= 2))


def test_decode_context_slowness_sends_tiny_ops_to_the_host():
    """A group of tiny ops runs fastest on the host CPU (its per-op overhead is the lowest): slowness says so."""
    g, c = load_graph(GRAPHS / "rnnlm.json.gz"), presets.get("4gpu")
    t = op_time_matrix(g, c)
    cpu = [d.kind for d in c.devices].index("cpu")
    tiny = t[:, cpu] < np.delete(t, cpu, axis=1).min(axis=1)
    assert 0 < tiny.sum() < len(g)
    grouping = Grouping(tiny.astype(np.int64), 2)  # group 1: the ops the CPU runs fastest
    ctx = decode_context(g, c, grouping, t)
    assert ctx.slowness[1, cpu] == 0 and np.all(np.delete(ctx.slowness[1], cpu) > 0)
    assert ctx.slowness[0, cpu] > 0


def test_load_features_read_balance_memory_and_inputs():
    load = np.array([[0.3, 0.1]])  # 0.4 of the compute placed, 0.2 would be fair
    memory = np.array([[0.5, 0.9]])
    f = load_features(load, memory, np.array([[1.0, 0.0]]), 0.4, 0.2, np.array([1.0, 1.0]), np.array([0.0, 0.5]),
                      np.array([[0.3, 0.0]]))
    assert f.shape == (1, 2, NUM_LOAD_FEATURES)
    np.testing.assert_allclose(f[0, :, 0], [0.2, -0.2], atol=1e-6)  # fair shares above the mean
    np.testing.assert_allclose(f[0, :, 1], [0.7, 1.1], atol=1e-6)  # memory use if the group goes there
    np.testing.assert_array_equal(f[0, :, 2], [0.0, 1.0])  # the second device would overflow
    np.testing.assert_array_equal(f[0, :, 3], [1.0, 0.0])  # all its inputs are on the first
    np.testing.assert_array_equal(f[0, :, 4], [0.0, 0.5])  # the group's slowness on each
    np.testing.assert_allclose(f[0, :, 5], [0.3, 0.0])  # it would finish later on the first


def test_finish_delay_weighs_a_busy_device_against_sending_the_inputs():
    """Group 2 takes group 0's output, on device 0, which group 1 then keeps busy until 0.9: on device 0 it
    waits for the device; on device 1 for the transfer (over a link half as fast as the slowest, plus its
    latency), and finishes first there, though it runs slower there."""
    ctx = DecodeContext(
        inflow=np.zeros((3, 3), np.float32), compute=np.full(3, 1 / 3, np.float32), memory=np.zeros(3, np.float32),
        capacity=np.ones(2, np.float32), slowness=np.zeros((3, 2), np.float32),
        duration=np.array([[0.5, 0.5], [0.4, 0.4], [0.2, 0.3]], np.float32),
        sent=np.array([[0, 0, 0.1], [0, 0, 0], [0, 0, 0]], np.float32),
        link=np.array([[0, 2.0], [2.0, 0]], np.float32), latency=np.array([[0, 0.05], [0.05, 0]], np.float32))
    finish = np.array([[0.5, 0.9, 0.0]], np.float32)
    where = np.array([[0, 0, 0]])
    ready = np.array([[0.9, 0.0]], np.float32)
    fin, delay = finish_delay(finish, where, ready, 2, ctx)
    np.testing.assert_allclose(fin, [[0.9 + 0.2, 0.5 + 0.1 * 2.0 + 0.05 + 0.3]], atol=1e-6)
    np.testing.assert_allclose(delay, [[0.05, 0.0]], atol=1e-6)
    ready[0, 0] = 0.5  # device 0 free when group 0 is done: no transfer beats it
    np.testing.assert_allclose(finish_delay(finish, where, ready, 2, ctx)[1], [[0.0, 0.35]], atol=1e-6)


def test_decode_context_times_are_fair_shares():
    g, c = layered_graph(400, seed=4), presets.get("4gpu")
    t = op_time_matrix(g, c)
    grouping = group_graph(g, c, 30, t)
    ctx = decode_context(g, c, grouping, t)
    G, D = grouping.num_groups, len(c)
    fair = t.min(axis=1).sum() / D
    on_device = np.stack([np.bincount(grouping.group_of_op, weights=t[:, d], minlength=G) for d in range(D)], 1)
    np.testing.assert_allclose(ctx.duration, on_device / fair, rtol=1e-5)
    assert ctx.sent.shape == (G, G) and np.all((ctx.inflow > 0) <= (ctx.sent > 0)) and np.all(np.diag(ctx.sent) == 0)
    assert np.all(np.diag(ctx.link) == 0) and np.isclose(ctx.link[~np.eye(D, dtype=bool)].max(), 1.0)
    assert ctx.latency.shape == (D, D) and np.all(ctx.latency >= 0) and np.all(np.diag(ctx.latency) == 0)


def test_device_link_column_reads_shared_routes_slower():
    """Behind a shared PCIe switch a GPU's routes get a fair share of their bottleneck; flat pairs share nothing."""
    topo = host_with_switch()
    bw, lat = topo.link_matrices()
    names = topo.device_names
    flat = Cluster("flat", topo.devices, links={frozenset((a, b)): Link(float(bw[i, j]), float(lat[i, j]))
                                                for i, a in enumerate(names) for j, b in enumerate(names) if i < j})
    shared, alone = device_features(topo)[:, -1], device_features(flat)[:, -1]
    assert (shared < alone).all()
    assert device_features(topo).shape == device_features(flat).shape
