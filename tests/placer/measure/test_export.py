"""Placed GraphDefs and placed user functions."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from placer.errors import PlacementError
from placer.measure.export import place_keras_step, placed_graphdef, write_placed_graphdef
from placer.measure.source import read_graphdef
from placer.placement import Placement
from tests.placer.measure.conftest import BATCH


def test_placed_graphdef_pins_every_node(tiny, split):
    _, _, graph, graph_def = tiny
    placed = placed_graphdef(graph, graph_def, split)
    assert len(placed.node) == len(graph_def.node)
    assert all(n.device for n in placed.node)
    for node in placed.node:
        if node.name in split.devices:
            assert node.device == split.devices[node.name]
    assert not any(n.device for n in graph_def.node if n.name == graph.ops[5].name)  # input left alone


def test_devices_of_two_machines_stay_apart(tiny, split):
    """A cluster of two machines names its devices by task: GPU 0 of task 1 is not GPU 0 of task 0 (both were
    written as /device:GPU:0, so the exported step ran on one machine)."""
    _, _, graph, graph_def = tiny
    task = {"/device:CPU:0": "/job:worker/task:0/gpu:0", "/device:CPU:1": "/job:worker/task:1/gpu:0"}
    two_machines = Placement(graph=graph.name, cluster="2x1gpu", method="split",
                             devices={op: task[dev] for op, dev in split.devices.items()})
    placed = {n.name: n.device for n in placed_graphdef(graph, graph_def, two_machines).node}
    for op, dev in split.devices.items():
        want = "/job:worker/replica:0/task:" + ("0" if dev == "/device:CPU:0" else "1") + "/device:GPU:0"
        assert placed[op] == want


@pytest.mark.parametrize("suffix", [".pb", ".pbtxt"])
def test_written_graphdef_reads_back(tmp_path, tiny, split, suffix):
    _, _, graph, graph_def = tiny
    path = tmp_path / f"placed{suffix}"
    write_placed_graphdef(graph, graph_def, split, path)
    back = read_graphdef(path)
    assert {n.name: n.device for n in back.node} == {n.name: n.device for n in placed_graphdef(graph, graph_def, split).node}


def test_keras_step_refuses_devices_eager_tf_lacks(tiny, split):
    """This test process has one eager CPU: a placement on CPU:1 must fail, not silently move."""
    import tensorflow as tf

    if len(tf.config.list_logical_devices("CPU")) > 1:
        pytest.skip("this process configured several logical CPUs")
    model, optimizer, graph, _ = tiny
    with pytest.raises(PlacementError, match="TensorFlow does not have here"):
        place_keras_step(model, BATCH, split, optimizer=optimizer)


def test_keras_step_with_wrong_placement(tiny):
    model, optimizer, graph, _ = tiny
    other = Placement(graph.name, "local", "x", {"not/an/op": "/device:CPU:0"})
    with pytest.raises(PlacementError, match="'not/an/op'"):
        place_keras_step(model, BATCH, other, optimizer=optimizer)


SCRIPT = textwrap.dedent("""
    import os
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    import numpy as np, tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras
    from placer.importers import from_keras
    from placer.measure.export import place_keras_step
    from tests.placer.measure.conftest import split_placement
    keras.utils.set_random_seed(0)
    inp = keras.Input((16,))
    x = keras.layers.Dense(8, activation="relu", name="hidden")(inp)
    model = keras.Model(inp, keras.layers.Dense(4, name="head")(x), name="mlp")
    opt = keras.optimizers.SGD(0.01, momentum=0.9)
    graph = from_keras(model, 4, optimizer=opt)
    placement = split_placement(graph)
    placed = place_keras_step(model, 4, placement, optimizer=opt)
    devices = {op.device for op in placed.graph.get_operations() if op.device}
    before = model.get_layer("hidden").kernel.numpy().copy()
    x, y = np.ones((4, 16), np.float32), np.zeros((4, 4), np.float32)
    loss = float(placed(x, y)[0])
    moved = float(np.abs(model.get_layer("hidden").kernel.numpy() - before).max())
    print(sorted(devices), loss > 0, moved > 0)
""")


def test_keras_step_runs_on_two_logical_cpus_and_trains_the_model():
    """In a fresh process with two logical CPUs: ops pinned to both, and the user's weights change."""
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "['/device:CPU:0', '/device:CPU:1'] True True"
