"""Features read the same way whatever the graph's size or the number of devices."""

import numpy as np

from placer import presets
from placer.cost_model import op_time_matrix
from placer.rl.features import (CATEGORY_NAMES, NUM_DEVICE_FEATURES, NUM_GROUP_FEATURES, device_features,
                                group_features, op_category)
from placer.rl.grouping import group_graph
from placer.synthetic import layered_graph


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
