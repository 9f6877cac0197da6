"""`expert`: the hand placement a human expert would write (Mirhoseini et al., ICML 2017).

For layered sequence models (LSTM language models, NMT with attention,
Transformers) the expert of the paper puts each layer, and the attention and
softmax, on its own GPU in turn (Sutskever et al. 2014; Wu et al. 2016);
an embedding goes with the layer after it.
Layers are found from the op names: the name scope up to the first part that
names a layer (``lstm_1``, ``attention``, ``dense``, ``encoder_0``,
``layer_3``...; not an unrolled time step such as ``lstm_cell_7``), after
dropping gradient prefixes so that a layer's backward ops follow it
(``gradient_tape/lm/lstm_1/...`` belongs to ``lm/lstm_1``, as TensorFlow's
``colocate_gradients_with_ops`` would place it). Layers are ordered by their
first op in topological order and dealt over the GPUs in turn; ops outside
any layer (loss, optimizer glue) follow their producer, else their consumer.

Other graphs get contiguous stages of the topological order, balanced by
compute time over the GPUs (a pipeline cut by hand). Colocation units take
the device most of their ops were given. On a topology the layers or
stages then swap GPUs by `placer.placers.routes.route_mapping`, so that the
ones that talk most do not share a switch uplink (an expert reads the
machine's topology too); `fit_to_memory` then relieves any GPU over the
memory estimate.
"""

from __future__ import annotations

import re

import numpy as np

from placer.cluster import Cluster
from placer.graph import OpGraph
from placer.placement import Placement
from placer.placers.common import Problem, expand_units, fit_to_memory
from placer.placers.registry import register
from placer.placers.routes import route_mapping

_GRADIENT_PREFIX = re.compile(r"^(gradient_tape|gradients?|training)(_\d+)?$", re.IGNORECASE)
# a scope part is a layer when one of its "_"-separated words names one ("src_embedding_1",
# "lstm_0", "attention_output") or it is a numbered encoder/decoder/layer/block ("encoder_0")
_LAYER_WORDS = {"lstm", "gru", "rnn", "attention", "attn", "softmax", "embedding", "embed", "dense", "logits",
                "projection", "ffn", "feedforward", "mlp", "output", "head"}
_NUMBERED = {"encoder", "decoder", "layer", "block"}
_TIME_STEP = re.compile(r"cell(_\d+)?$", re.IGNORECASE)  # one step of an unrolled RNN, not a layer
_SEQUENCE = re.compile(r"(lstm|gru|rnn|attention|attn|transformer|multi_?head|encoder|decoder)", re.IGNORECASE)
_RECURRENT_OPS = {"While", "StatelessWhile", "CudnnRNN", "CudnnRNNV2", "CudnnRNNV3", "BlockLSTM", "BlockLSTMV2",
                  "LSTMBlockCell", "GRUBlockCell"}


def _layer_name(part: str) -> str | None:
    """The layer a scope part names, or None.

    A numbered encoder/decoder/layer/block names its whole block, so its
    sublayers share it: ``encoder_0_self_attention_1`` and ``encoder_0_ffn1_1``
    are both ``encoder_0``.
    """
    if _TIME_STEP.search(part):
        return None
    words = part.split("_")
    lower = [w.lower() for w in words]
    for k, w in enumerate(lower):
        if w in _NUMBERED and k + 1 < len(words) and words[k + 1].isdigit():
            return "_".join(words[:k + 2])
    return part if any(w in _LAYER_WORDS for w in lower) else None


def layer_key(name: str) -> str | None:
    """The layer an op belongs to, from its name scope; None outside any layer.

    Examples
    --------
    >>> layer_key("gradient_tape/lm/lstm_1/while/MatMul")
    'lm/lstm_1'
    >>> layer_key("decoder/attention/Softmax")
    'decoder/attention'
    >>> layer_key("nmt/encoder_0/lstm_cell_7/MatMul")
    'nmt/encoder_0'
    >>> layer_key("transformer/encoder_3_ffn1/MatMul")
    'transformer/encoder_3'
    >>> layer_key("rnnlm/lstm_0/lstm_cell_3/MatMul")
    'rnnlm/lstm_0'
    >>> layer_key("sgd/Mul") is None
    True
    """
    scopes = name.split("/")[:-1]
    while scopes and _GRADIENT_PREFIX.match(scopes[0]):
        scopes = scopes[1:]
    for k, part in enumerate(scopes):
        layer = _layer_name(part)
        if layer is not None:
            return "/".join(scopes[:k] + [layer])
    return None


def sequence_layers(problem: Problem) -> tuple[np.ndarray, list[str]] | None:
    """Layer index per op (-1 outside layers) and the layer names, for a layered sequence model.

    Returns None unless the graph looks like one: at least two layers, and a
    recurrent or attention layer (by name) or a recurrent op type.
    """
    keys = [layer_key(op.name) for op in problem.graph.ops]
    names = sorted({k for k in keys if k is not None})
    recurrent = any(_SEQUENCE.search(k) for k in names) or any(
        op.op in _RECURRENT_OPS for op in problem.graph.ops)
    if len(names) < 2 or not recurrent:
        return None
    rank = problem.graph.topo_rank
    first: dict[str, int] = {}
    for i, k in enumerate(keys):
        if k is not None and (k not in first or rank[i] < first[k]):
            first[k] = int(rank[i])
    ordered = sorted(first, key=first.get)
    index = {k: j for j, k in enumerate(ordered)}
    return np.array([-1 if k is None else index[k] for k in keys], dtype=np.int64), ordered


def _deal(names: list[str]) -> np.ndarray:
    """GPU turn of each layer: one per layer, except that an embedding shares the next layer's turn.

    An embedding lookup is a few microseconds of work; the expert of the
    paper keeps it with the first layer that reads it.
    """
    turn, turns = 0, []
    for k, name in enumerate(names):
        turns.append(turn)
        last_word = name.split("/")[-1].lower().split("_")
        if not ({"embedding", "embed"} & set(last_word)) or k == len(names) - 1:
            turn += 1
    return np.asarray(turns, dtype=np.int64)


def follow_neighbours(problem: Problem, device: np.ndarray) -> np.ndarray:
    """Give each op without a device (-1) its producer's device, else its consumer's, else the first GPU."""
    device = device.copy()
    p_off, p_idx = problem.graph.predecessors
    s_off, s_idx = problem.graph.successors
    for i in problem.graph.topo_order.tolist():
        if device[i] < 0:
            for m in p_idx[p_off[i]:p_off[i + 1]].tolist():
                if device[m] >= 0:
                    device[i] = device[m]
                    break
    for i in problem.graph.topo_order[::-1].tolist():
        if device[i] < 0:
            for j in s_idx[s_off[i]:s_off[i + 1]].tolist():
                if device[j] >= 0:
                    device[i] = device[j]
                    break
    device[device < 0] = problem.candidates[0]
    return device


def balanced_stages(problem: Problem, devices: np.ndarray) -> np.ndarray:
    """Device per unit: contiguous runs of units (topological order) of about equal compute time.

    On GPUs of different speeds each stage's share of the work is proportional
    to its device's speed (`placer.placers.metis.target_shares`), so the stages
    take about equal time.
    """
    from placer.placers.metis import target_shares

    cost = np.bincount(problem.unit, weights=problem.times[:, devices].min(axis=1), minlength=problem.num_units)
    total = float(cost.sum())
    shares = target_shares(problem, devices)
    if total <= 0:
        stage = np.arange(problem.num_units) * len(devices) // max(problem.num_units, 1)
    elif shares is not None:
        middle = np.cumsum(cost) - cost / 2
        stage = np.minimum(np.searchsorted(np.cumsum(shares), middle / total, side="right"), len(devices) - 1)
    else:
        middle = np.cumsum(cost) - cost / 2
        stage = np.minimum((middle / total * len(devices)).astype(np.int64), len(devices) - 1)
    return devices[stage]


def unit_vote(problem: Problem, op_device: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Device per unit: the device carrying most `weight` of its ops (ties: lowest index)."""
    D = problem.num_devices
    votes = np.zeros((problem.num_units, D))
    np.add.at(votes, (problem.unit, op_device), weight)
    return votes.argmax(axis=1)


@register("expert", description="human expert: one layer (attention, softmax) per GPU in turn; "
                                "else cost-balanced pipeline stages")
def place_expert(graph: OpGraph, cluster: Cluster) -> Placement:
    """The expert placement; see the module docstring."""
    problem = Problem.build(graph, cluster)
    devices = problem.candidates
    layers = sequence_layers(problem)
    if layers is not None:
        layer, names = layers
        layer_device = devices[_deal(names) % len(devices)]
        op_device = np.where(layer >= 0, layer_device[np.maximum(layer, 0)], -1)
        op_device = follow_neighbours(problem, op_device)
        # ops that sit in a layer outvote the glue that merely followed them
        unit_device = unit_vote(problem, op_device, np.where(layer >= 0, 1.0, 1e-3))
        how = {"expert_mode": "layers", "num_layers": len(names), "layers": names[:64]}
    else:
        unit_device = balanced_stages(problem, devices)
        how = {"expert_mode": "stages"}
    unit_device = route_mapping(problem, unit_device, devices)[unit_device]
    unit_device, ledger = fit_to_memory(problem, unit_device, devices)
    return problem.placement(expand_units(problem, unit_device), "expert", ledger, **how)
