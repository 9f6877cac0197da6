"""Features: what the policy knows about each group and each device.

Every feature is a share, a ratio or a position, never a raw count, size or
name, so the same policy reads a 300-op graph and a 15,000-op one, on 2 or 8
devices. Shares are scaled by the number of groups (a group of average
weight reads 1) and passed through ``log1p``.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

import numpy as np

from placer.cluster import Cluster
from placer.dag import levels
from placer.graph import OpGraph
from placer.grouping import Grouping
from placer.topology import route_facts

# Op types by role, matched in order against the op type; anything else is "other".
OP_CATEGORIES: list[tuple[str, re.Pattern]] = [
    ("optimizer", re.compile(r"^(Resource)?Apply|^AssignSub|^AssignAdd|^Assign")),
    ("gradient", re.compile(r"Grad|Backprop")),
    ("conv", re.compile(r"Conv|Pool|DepthwiseConv")),
    ("matmul", re.compile(r"MatMul|Einsum|Tensordot")),
    ("norm", re.compile(r"BatchNorm|LayerNorm|Moments|L2Loss|FusedBatchNorm|Norm")),
    ("activation", re.compile(r"^(Relu|Relu6|Elu|Selu|Sigmoid|Tanh|Softmax|LogSoftmax|Softplus|Gelu)")),
    ("elementwise", re.compile(r"^(Add|AddV2|AddN|Sub|Mul|Div|RealDiv|Neg|Square|Sqrt|Rsqrt|Exp|Log|Maximum|Minimum"
                               r"|BiasAdd|Cast|Pow)")),
    ("reduction", re.compile(r"^(Sum|Mean|Max|Min|Prod|ArgMax|ArgMin|All|Any)$|Reduce")),
    ("shape", re.compile(r"Reshape|Transpose|Concat|Split|Slice|Pack|Unpack|Squeeze|ExpandDims|Tile|Pad|Gather"
                         r"|Shape|Fill|Identity")),
    ("variable", re.compile(r"Variable|ReadVariable|Placeholder|VarHandle")),
    ("const", re.compile(r"^Const$|ZerosLike|OnesLike")),
    ("recurrent", re.compile(r"LSTM|GRU|RNN|While|Enter|Exit|NextIteration|Merge|Switch")),
]
CATEGORY_NAMES = [name for name, _ in OP_CATEGORIES] + ["other"]
NUM_GROUP_FEATURES = len(CATEGORY_NAMES) + 14
NUM_DEVICE_FEATURES = 7
NUM_LOAD_FEATURES = 6
"""Per device, while a load-aware decoder places groups one by one (`load_features`)."""


@functools.lru_cache(maxsize=4096)
def op_category(op_type: str) -> int:
    """Index in `CATEGORY_NAMES` of an op type (cached: a graph has a few dozen types and thousands of ops)."""
    for k, (_, pattern) in enumerate(OP_CATEGORIES):
        if pattern.search(op_type):
            return k
    return len(OP_CATEGORIES)


def group_features(graph: OpGraph, cluster: Cluster, grouping: Grouping, times: np.ndarray) -> np.ndarray:
    """Features ``[G, NUM_GROUP_FEATURES]`` (float32) of each group, in group order.

    Columns: op-category histogram (shares of the group's ops), then the
    group's share of ops, compute time, weights and output bytes (scaled by
    G, ``log1p``), its slow/fast device time ratio, memory as a share of the
    smallest device, bytes sent and received over the slowest link relative
    to its compute time, in/out degree among groups, topological position
    (first and last op), and how early and how late on the critical path its
    ops sit.
    """
    n, G = len(graph), grouping.num_groups
    gid = grouping.group_of_op
    cat = np.array([op_category(op.op) for op in graph.ops])
    hist = np.zeros((G, len(CATEGORY_NAMES)))
    np.add.at(hist, (gid, cat), 1.0)
    count = hist.sum(axis=1)
    hist /= count[:, None]

    fast = times.min(axis=1)
    slow = times.max(axis=1)
    params = graph.param_bytes
    out = graph.output_bytes

    def share(values: np.ndarray) -> np.ndarray:
        per_group = np.bincount(gid, weights=values, minlength=G)
        total = per_group.sum()
        return np.log1p(per_group / total * G) if total > 0 else np.zeros(G)

    g_fast = np.bincount(gid, weights=fast, minlength=G)
    g_slow = np.bincount(gid, weights=slow, minlength=G)
    g_mem = group_memory(graph, cluster, grouping)

    p_off, p_idx = graph.predecessors
    dst = np.repeat(np.arange(n), np.diff(p_off))
    src = p_idx
    cross = gid[src] != gid[dst]
    bw, lat = cluster.link_matrices()
    slowest_bw = bw[np.isfinite(bw)].min() if len(cluster) > 1 else np.inf
    link_time = out[src[cross]] / slowest_bw
    sent = np.bincount(gid[src[cross]], weights=link_time, minlength=G)
    received = np.bincount(gid[dst[cross]], weights=link_time, minlength=G)
    pair = np.unique(gid[src[cross]] * G + gid[dst[cross]])  # distinct (group, group) edges
    out_deg = np.bincount(pair // G, minlength=G)
    in_deg = np.bincount(pair % G, minlength=G)

    rank = graph.topo_rank / max(n - 1, 1)
    first = np.full(G, np.inf)
    last = np.full(G, -np.inf)
    np.minimum.at(first, gid, rank)
    np.maximum.at(last, gid, rank)
    top, bottom = levels(graph, fast)
    cp = max(float((top + fast).max()), 1e-30)
    early = np.bincount(gid, weights=top / cp, minlength=G) / count
    late = np.bincount(gid, weights=bottom / cp, minlength=G) / count

    cols = [
        hist,
        share(np.ones(n))[:, None],
        share(fast)[:, None],
        share(params)[:, None],
        share(out)[:, None],
        np.log10(np.maximum(g_slow, 1e-30) / np.maximum(g_fast, 1e-30))[:, None] / 3.0,
        np.log1p(g_mem)[:, None],
        np.log1p(sent / np.maximum(g_fast, 1e-12))[:, None] / 5.0,
        np.log1p(received / np.maximum(g_fast, 1e-12))[:, None] / 5.0,
        np.log1p(out_deg)[:, None] / 3.0,
        np.log1p(in_deg)[:, None] / 3.0,
        first[:, None],
        last[:, None],
        np.stack([early, late], axis=1),
    ]
    feats = np.concatenate(cols, axis=1).astype(np.float32)
    assert feats.shape == (G, NUM_GROUP_FEATURES)
    return np.nan_to_num(feats, nan=0.0, posinf=10.0, neginf=-10.0)


def group_memory(graph: OpGraph, cluster: Cluster, grouping: Grouping) -> np.ndarray:
    """``[G]``: each group's weights and outputs relative to the smallest device's memory."""
    held = graph.param_bytes + graph.output_bytes
    return np.bincount(grouping.group_of_op, weights=held, minlength=grouping.num_groups) / min(
        d.memory_bytes for d in cluster.devices)


def device_features(cluster: Cluster) -> np.ndarray:
    """Features ``[D, NUM_DEVICE_FEATURES]`` (float32) of each device.

    Columns: kind (gpu, cpu, other), peak FLOP/s, memory bandwidth and memory
    relative to the cluster's best (log10), and the device's mean link
    bandwidth relative to the cluster's best link (log10). A link here is the
    route to each other device (`placer.topology.route_facts`), at its fair
    share: its bottleneck bandwidth over how many device pairs use its
    busiest link direction, so a GPU behind a shared PCIe switch reads
    slower than one with NVLink to every peer. On a flat cluster no pair
    shares and this is each pair's own link, the column the shipped policy
    was trained on; folding the sharing into that column, rather than adding
    one, keeps the policy's inputs the shape it was saved with.
    """
    devs = cluster.devices
    flops = np.array([d.peak_flops for d in devs])
    mbw = np.array([d.memory_bandwidth for d in devs])
    mem = np.array([d.memory_bytes for d in devs])
    facts = route_facts(cluster.routes(), len(devs))
    if len(devs) > 1:
        finite = np.where(np.isfinite(facts.bandwidth), facts.bandwidth, np.nan)
        mean_bw = np.nanmean(finite / np.maximum(facts.sharers, 1), axis=1)
        link = np.log10(mean_bw / np.nanmax(finite))
    else:
        link = np.zeros(1)
    feats = np.stack([
        np.array([d.kind == "gpu" for d in devs], dtype=float),
        np.array([d.kind == "cpu" for d in devs], dtype=float),
        np.array([d.kind not in ("gpu", "cpu") for d in devs], dtype=float),
        np.log10(flops / flops.max()),
        np.log10(mbw / mbw.max()),
        np.log10(mem / mem.max()),
        link,
    ], axis=1).astype(np.float32)
    assert feats.shape[1] == NUM_DEVICE_FEATURES
    return feats


class DecodeContext(NamedTuple):
    """What a load-aware decoder (`placer.rl.policy.PolicyConfig.load_aware`) needs to know, as it places
    the groups one by one, about the devices' load so far: the same shares and ratios as the features, so
    it too reads any graph on any cluster."""

    inflow: np.ndarray
    """``[G, G]`` float32: row j, column t, the share of group t's input bytes that group j produces."""
    compute: np.ndarray
    """``[G]`` float32: each group's share of the graph's compute time (on the fastest device)."""
    memory: np.ndarray
    """``[G]`` float32: `group_memory`."""
    capacity: np.ndarray
    """``[D]`` float32: each device's memory relative to the smallest device's."""
    slowness: np.ndarray
    """``[G, D]`` float32: ``log10`` of each group's compute time on each device over its time on its fastest
    device (at most 2): which devices suit the group, e.g. a group of tiny ops the host CPU runs faster."""
    duration: np.ndarray
    """``[G, D]`` float32: each group's compute time on each device, in fair shares (the graph's compute time
    on the fastest devices over D)."""
    sent: np.ndarray
    """``[G, G]`` float32: row j, column t, the time to send group t the tensors it takes from group j over the
    cluster's slowest link, in fair shares (0 where t takes nothing from j; above 0 where it does, if only
    an ordering)."""
    link: np.ndarray
    """``[D, D]`` float32: the slowest link's bandwidth over the bandwidth from device i to device j (0 on the
    diagonal: nothing is sent); `sent` times this is the time on that link."""
    latency: np.ndarray
    """``[D, D]`` float32: each link's latency in fair shares (0 on the diagonal)."""


def decode_context(graph: OpGraph, cluster: Cluster, grouping: Grouping, times: np.ndarray) -> DecodeContext:
    """The `DecodeContext` of a grouped graph (each tensor counted once per consuming group)."""
    G = grouping.num_groups
    gid = grouping.group_of_op
    out = graph.output_bytes
    p_off, p_idx = graph.predecessors
    dst_group = np.repeat(gid, np.diff(p_off))
    pair = np.unique(p_idx * G + dst_group)  # (producer, consuming group), sorted as unique(axis=1) sorts them
    src, dst = pair // G, pair % G
    cross = gid[src] != dst
    inflow = np.zeros((G, G))
    np.add.at(inflow, (gid[src[cross]], dst[cross]), out[src[cross]])
    edge = np.zeros((G, G), dtype=bool)
    edge[gid[src[cross]], dst[cross]] = True
    sent_bytes = inflow.copy()
    received = inflow.sum(axis=0)
    inflow /= np.where(received > 0, received, 1.0)[None, :]
    fast = times.min(axis=1)
    total = float(fast.sum())
    compute = np.bincount(gid, weights=fast, minlength=G)
    compute = compute / total if total > 0 else np.full(G, 1.0 / G)
    mem = np.array([d.memory_bytes for d in cluster.devices], dtype=np.float64)
    D = times.shape[1]
    on_device = np.stack([np.bincount(gid, weights=times[:, d], minlength=G) for d in range(D)], axis=1)
    fastest = on_device.min(axis=1, keepdims=True)
    slowness = np.minimum(np.log10(np.maximum(on_device, 1e-30) / np.maximum(fastest, 1e-30)), 2.0)
    fair = total / D if total > 0 else 1.0
    bw, lat = cluster.link_matrices()
    off = ~np.eye(D, dtype=bool)
    slowest = float(bw[off].min()) if D > 1 else 1.0
    link = np.where(off, slowest / np.where(off, bw, 1.0), 0.0)
    sent = np.where(edge, np.maximum(sent_bytes / slowest / fair, 1e-9), 0.0)
    return DecodeContext(inflow.astype(np.float32), compute.astype(np.float32),
                         group_memory(graph, cluster, grouping).astype(np.float32),
                         (mem / mem.min()).astype(np.float32),
                         slowness.astype(np.float32), (on_device / fair).astype(np.float32), sent.astype(np.float32),
                         link.astype(np.float32), (lat / fair).astype(np.float32))


def finish_delay(finish: np.ndarray, where: np.ndarray, ready: np.ndarray, t: int,
                 context: DecodeContext) -> tuple[np.ndarray, np.ndarray]:
    """When group t would finish on each device, for K partial placements of groups ``0..t-1``: an earliest-
    finish-time estimate at group level, as the ETF and HEFT list schedulers make it per op.

    `finish` ``[K, G]``: when each placed group finishes (fair shares); `where` ``[K, G]``: its device;
    `ready` ``[K, D]``: when each device is free. Group t starts on device d once d is free and the inputs
    of its placed predecessors have arrived there (over the link between the devices; at once on the same
    device). Returns ``(finish [K, D], delay [K, D])``, the delay being how much later than on its earliest
    device, at most 2 fair shares (`placer.rl.policy.PlacementPolicy.decode` computes the same in TensorFlow).
    """
    preds = np.flatnonzero(context.sent[:t, t] > 0)
    arrive = np.zeros_like(ready)
    if len(preds):
        src = where[:, preds]  # [K, P]
        cost = context.sent[preds, t][None, :, None] * context.link[src] + context.latency[src]  # [K, P, D]
        arrive = np.maximum(arrive, (finish[:, preds, None] + cost).max(axis=1))
    fin = np.maximum(ready, arrive) + context.duration[t][None, :]
    return fin, np.minimum(fin - fin.min(axis=1, keepdims=True), 2.0)


def load_features(load: np.ndarray, memory: np.ndarray, inflow: np.ndarray, progress: float,
                  own_memory: float, capacity: np.ndarray, slowness: np.ndarray, delay: np.ndarray) -> np.ndarray:
    """Features ``[K, D, NUM_LOAD_FEATURES]`` (float32) of each device before group t is placed, for K
    placements (`placer.rl.policy.PlacementPolicy.decode` computes the same in TensorFlow).

    `load` ``[K, D]``: compute shares placed on each device so far; `memory` ``[K, D]``: memory placed
    (`DecodeContext.memory` units); `inflow` ``[K, D]``: share of group t's input bytes already on each
    device; `progress`: the compute share placed so far (all devices); `own_memory`: group t's memory;
    `capacity` ``[D]``; `slowness` ``[D]``: group t's row of `DecodeContext.slowness`; `delay` ``[K, D]``:
    from `finish_delay`. Columns: load above the fair share, in fair shares (0 when every device has the
    same); memory use if t goes there, as a share of the device (at most 2); 1 if that overflows it; the
    share of t's inputs already there; t's slowness there; how much later t would finish there than on
    its earliest device.
    """
    excess = load * load.shape[-1] - progress
    use = (memory + own_memory) / capacity
    return np.stack([excess, np.minimum(use, 2.0), (use > 1.0).astype(np.float32), inflow,
                     np.broadcast_to(slowness, load.shape), delay], axis=-1).astype(np.float32)
