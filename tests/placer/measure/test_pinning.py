"""Device names made canonical, and folded nodes following their consumers."""

from __future__ import annotations

import pytest

from placer.errors import PlacementError
from placer.measure.pinning import canonical_device, node_devices
from tests.placer.measure.conftest import CPU0, CPU1


@pytest.mark.parametrize("name, expected", [
    ("/device:CPU:1", CPU1), ("/cpu:1", CPU1), ("CPU:1", CPU1),
    ("/job:localhost/replica:0/task:0/device:CPU:1", CPU1), ("/device:GPU:0", "/device:GPU:0"),
    ("/job:worker/task:1/gpu:0", "/job:worker/replica:0/task:1/device:GPU:0"),
    ("/job:worker/replica:0/task:0/device:GPU:0", "/job:worker/replica:0/task:0/device:GPU:0"),
    ("/job:localhost/task:2/cpu:0", "/job:localhost/replica:0/task:2/device:CPU:0"),
])
def test_canonical_device(name, expected):
    assert canonical_device(name) == expected


def test_not_a_device_name():
    with pytest.raises(PlacementError, match="not a TensorFlow device"):
        canonical_device("/job:localhost")


def test_every_node_gets_a_device_and_constants_follow_consumers(tiny, split):
    _, _, graph, graph_def = tiny
    devices = node_devices(graph, graph_def, split)
    assert set(devices) == {n.name for n in graph_def.node}
    for op in graph:
        assert devices[op.name] == split.devices[op.name]
    consumers = {}
    for node in graph_def.node:
        for src in node.input:
            consumers.setdefault(src.lstrip("^").partition(":")[0], []).append(node.name)
    consts = [n for n in graph_def.node if n.op == "Const" and n.name in consumers]
    assert consts
    for node in consts:
        first = consumers[node.name][0]
        assert devices[node.name] == devices[first]
