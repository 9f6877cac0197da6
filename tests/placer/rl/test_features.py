"""Features read the same way whatever the graph's size or the number of devices."""

from pathlib import Path

import numpy as np

from placer import presets
from placer.cost_model import op_time_matrix
from placer.graph_io import load_graph
from placer.rl.features import (CATEGORY_NAMES, NUM_DEVICE_FEATURES, NUM_GROUP_FEATURES, NUM_LOAD_FEATURES,
                                decode_context, device_features, group_features, load_features, op_category)
from placer.rl.grouping import Grouping, group_graph
from placer.synthetic import layered_graph

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
    f = load_features(load, memory, np.array([[1.0, 0.0]]), 0.4, 0.2, np.array([1.0, 1.0]), np.array([0.0, 0.5]))
    assert f.shape == (1, 2, NUM_LOAD_FEATURES)
    np.testing.assert_allclose(f[0, :, 0], [0.2, -0.2], atol=1e-6)  # fair shares above the mean
    np.testing.assert_allclose(f[0, :, 1], [0.7, 1.1], atol=1e-6)  # memory use if the group goes there
    np.testing.assert_array_equal(f[0, :, 2], [0.0, 1.0])  # the second device would overflow
    np.testing.assert_array_equal(f[0, :, 3], [1.0, 0.0])  # all its inputs are on the first
    np.testing.assert_array_equal(f[0, :, 4], [0.0, 0.5])  # the group's slowness on each
