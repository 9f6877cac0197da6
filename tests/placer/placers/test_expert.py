"""The expert placement: layers of sequence models per GPU, else balanced stages."""

import numpy as np
import pytest

from placer import presets
from placer.graph import Op, OpGraph
from placer.placers import registry
from placer.placers.expert import layer_key


@pytest.mark.parametrize("name, key", [
    ("lm/lstm_1/while", "lm/lstm_1"),
    ("gradient_tape/lm/lstm_1/while/grad/MatMul", "lm/lstm_1"),
    ("encoder/lstm_0/lstm_cell/MatMul", "encoder/lstm_0"),
    ("decoder/attention/Softmax", "decoder/attention"),
    ("transformer/encoder/layer_3/ffn/Relu", "transformer/encoder/layer_3"),
    ("nmt4_1/encoder_0_1/lstm_cell_7/MatMul", "nmt4_1/encoder_0"),
    ("gradient_tape/nmt4_1/decoder_3_1/lstm_cell_1/mul", "nmt4_1/decoder_3"),
    ("transformer_1/encoder_2_self_attention_1/Softmax", "transformer_1/encoder_2"),
    ("transformer_1/encoder_2_ffn1_1/MatMul", "transformer_1/encoder_2"),
    ("nmt4_1/softmax_1/BiasAdd", "nmt4_1/softmax_1"),
    ("sgd/AssignAddVariableOp", None),
    ("Mean", None),
])
def test_layer_key(name, key):
    assert layer_key(name) == key


def lstm_lm(layers: int = 3) -> OpGraph:
    """A toy LSTM language model step: embedding, LSTM layers, softmax, their gradients, SGD."""
    scopes = ["lm/embedding"] + [f"lm/lstm_{k}" for k in range(layers)] + ["lm/dense"]
    ops, prev = [Op("x", "Placeholder", output_bytes=1e6, cost={"gpu": 1e-6})], "x"
    for s in scopes:
        ops.append(Op(f"{s}/kernel", "VarHandleOp", param_bytes=4e6, cost={"gpu": 1e-6}, colocation=s))
        ops.append(Op(f"{s}/MatMul", "MatMul", [prev, f"{s}/kernel"], output_bytes=1e6, cost={"gpu": 1e-4}))
        prev = f"{s}/MatMul"
    ops.append(Op("loss", "Mean", [prev], output_bytes=4, cost={"gpu": 1e-6}))
    grad = "loss"
    for s in reversed(scopes):
        ops.append(Op(f"gradient_tape/{s}/MatMul_grad", "MatMul", [grad, f"{s}/MatMul"], output_bytes=1e6,
                      cost={"gpu": 2e-4}))
        ops.append(Op(f"sgd/update_{s.replace('/', '_')}", "ResourceApplyGradientDescent",
                      [f"{s}/kernel", f"gradient_tape/{s}/MatMul_grad"], cost={"gpu": 1e-5}, colocation=s))
        grad = f"gradient_tape/{s}/MatMul_grad"
    return OpGraph("lm", ops)


def test_each_layer_on_its_own_gpu_in_turn():
    """lstm_0, lstm_1, lstm_2 and the softmax layer on GPUs 0-3; the embedding rides with lstm_0."""
    g = lstm_lm(3)
    p = registry.place("expert", g, presets.get("8gpu"))
    assert p.meta["expert_mode"] == "layers"
    assert p.meta["layers"] == ["lm/embedding", "lm/lstm_0", "lm/lstm_1", "lm/lstm_2", "lm/dense"]
    for k, s in zip([0, 0, 1, 2, 3], p.meta["layers"]):
        gpu = f"/device:GPU:{k}"
        assert p.devices[f"{s}/MatMul"] == gpu
        assert p.devices[f"gradient_tape/{s}/MatMul_grad"] == gpu  # backward follows forward
        assert p.devices[f"{s}/kernel"] == gpu  # and so do the weights and their update
        assert p.devices[f"sgd/update_{s.replace('/', '_')}"] == gpu


def test_layers_wrap_around_fewer_gpus():
    p = registry.place("expert", lstm_lm(3), presets.get("2gpu"))
    layers = p.meta["layers"]
    assert [p.devices[f"{s}/MatMul"] for s in layers] == [f"/device:GPU:{k}" for k in (0, 0, 1, 0, 1)]


def test_other_graphs_get_contiguous_balanced_stages():
    """A chain of equal ops over 4 GPUs: four contiguous runs of equal length."""
    g = OpGraph("cnn", [Op(f"conv{k}", "Conv2D", [f"conv{k - 1}"] if k else [], cost={"gpu": 1e-3})
                        for k in range(20)])
    p = registry.place("expert", g, presets.get("4gpu"))
    assert p.meta["expert_mode"] == "stages"
    got = [p.devices[f"conv{k}"] for k in range(20)]
    assert got == [f"/device:GPU:{k // 5}" for k in range(20)]


def test_no_gpu_cluster_uses_every_device():
    g = OpGraph("chain", [Op(f"o{k}", "X", [f"o{k - 1}"] if k else [], cost={"cpu": 1.0}) for k in range(4)])
    p = registry.place("expert", g, presets.get("local:2"))
    assert list(p.devices.values()) == ["/device:CPU:0"] * 2 + ["/device:CPU:1"] * 2
    assert np.isfinite(p.step_time)


def test_stages_on_gpus_of_different_speeds_take_equal_time():
    """A GPU three times as fast gets a stage with three times the work."""
    from placer.cluster import Cluster, Device, Link

    devices = [Device("fast", "gpu", 3e12, 1e15, 1e12, op_overhead=0.0),
               Device("slow", "gpu", 1e12, 1e15, 1e12, op_overhead=0.0)]
    c = Cluster("c", devices, default_link=Link(1e9, 0.0))
    g = OpGraph("chain", [Op(f"o{k}", "X", [f"o{k - 1}"] if k else [], flops=1e9) for k in range(12)])
    p = registry.place("expert", g, c)
    assert [p.devices[f"o{k}"] for k in range(12)] == ["fast"] * 9 + ["slow"] * 3
