"""The policy's forward pass in NumPy: decode placements from saved weights without TensorFlow.

Placing a graph with a trained policy is one pass of a small network over a
few hundred groups. Importing TensorFlow and tracing the decoder takes
seconds; this pass takes milliseconds. It computes what
`placer.rl.policy.PlacementPolicy.decode` computes, with the products that
do not change from group to group taken once (the tests check both give the
same log-probabilities and greedy placement).

The pass runs with one BLAS thread: its products are small (a few hundred
rows), so more threads only add hand-offs, and on a busy machine they fight
other work for the same cores (zero-shot placing took 5x longer with
OpenBLAS's default threads beside other processes).
"""

from __future__ import annotations

import numpy as np
from threadpoolctl import ThreadpoolController

from placer.rl.features import DecodeContext, finish_delay, load_features

LOGIT_GAIN = 4.0  # as in PlacementPolicy.decode
ONE_BLAS_THREAD = ThreadpoolController().wrap(limits=1, user_api="blas")
"""Decorator: BLAS limited to one thread for the call (restored after)."""


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (np.tanh(0.5 * x) + 1.0)


def _run(w: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    H = b.shape[0] // 4
    h = np.zeros((1, H), np.float32)
    c = np.zeros((1, H), np.float32)
    out = np.empty((len(x), H), np.float32)
    # the input projection of every step at once; only the recurrent half stays in the loop
    xw = x @ w[: x.shape[1]] + b
    wh = w[x.shape[1]:]
    for t in range(len(x)):
        gates = xw[t:t + 1] + h @ wh
        c = _sigmoid(gates[:, H:2 * H]) * c + _sigmoid(gates[:, :H]) * np.tanh(gates[:, 2 * H:3 * H])
        h = _sigmoid(gates[:, 3 * H:]) * np.tanh(c)
        out[t] = h[0]
    return out


@ONE_BLAS_THREAD
def encode(weights: dict[str, np.ndarray], groups: np.ndarray) -> np.ndarray:
    """Encoder states ``[G, 2H]`` of group features ``[G, F]``."""
    x = np.tanh(groups @ weights["embed_w"] + weights["embed_b"]).astype(np.float32)
    fwd = _run(weights["fwd.w"], weights["fwd.b"], x)
    bwd = _run(weights["bwd.w"], weights["bwd.b"], x[::-1])[::-1]
    return np.concatenate([fwd, bwd], 1)


@ONE_BLAS_THREAD
def decode(weights: dict[str, np.ndarray], groups: np.ndarray, devices: np.ndarray, num_samples: int = 1,
           greedy: bool = True, rng: np.random.Generator | None = None,
           actions: np.ndarray | None = None, temperature: float = 1.0,
           context: DecodeContext | None = None, greedy_rows: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Decode placements of groups.

    Parameters
    ----------
    weights : the policy's arrays (`placer.rl.saved_policy.SavedPolicy.weights`).
    groups : ``[G, F]`` group features; devices : ``[D, F_d]`` device features.
    num_samples : K placements decoded side by side.
    greedy : the most likely device for every group (then all K are the same).
    rng : the sampler's generator when not greedy (seeded: same seed, same samples).
    actions : ``[K, G]`` placements to score instead of choosing (teacher forcing).
    temperature : divides the logits, as in `PlacementPolicy.decode` (above 1 spreads the samples; the
        greedy placement is the same at every temperature). Log-probabilities are of the tempered softmax.
    context : the groups' `placer.rl.features.DecodeContext`; needed, and only read, by a load-aware
        policy (one with ``load_w``).
    greedy_rows : when sampling, the first this many of the K rows are greedy instead (one pass
        decodes a greedy placement and samples; the samples are those of the other K - greedy_rows).

    Returns
    -------
    (actions ``[K, G]`` int64, log_prob ``[K]``)
    """
    groups = np.asarray(groups, np.float32)
    devices = np.asarray(devices, np.float32)
    enc = encode(weights, groups)
    hidden = weights["dec.b"].shape[0] // 4
    attention = weights["att_enc"].shape[1]
    dev = np.tanh(devices @ weights["dev_w"] + weights["dev_b"]) + weights["dev_slot"][: len(devices)]
    keys = enc @ weights["att_enc"]
    scale = LOGIT_GAIN / np.sqrt(hidden) / temperature
    att_scale = 1.0 / np.sqrt(attention)
    G, K = len(groups), num_samples
    if rng is None:
        rng = np.random.default_rng(0)
    h = np.zeros((K, hidden), np.float32)
    c = np.zeros((K, hidden), np.float32)
    prev = np.tile(weights["go"][None, :], (K, 1))
    out = np.empty((K, G), np.int64)
    logp = np.zeros(K, np.float64)
    # the decoder's input projection splits into [own encoding | previous device | context] blocks
    w_dec, b_dec = weights["dec.w"], weights["dec.b"]
    H2 = enc.shape[1]
    own_proj = enc @ w_dec[:H2]  # [G, 4H]: each group's own encoding, projected once
    w_prev = w_dec[H2:H2 + hidden]
    w_ctx = w_dec[H2 + hidden:H2 + hidden + H2]
    w_h = w_dec[H2 + hidden + H2:]
    att_dec, out_w, out_b = weights["att_dec"], weights["out_w"], weights["out_b"]
    load_w = weights.get("load_w")
    if load_w is not None:
        if context is None:
            raise ValueError("a load-aware policy decodes with a DecodeContext")
        D = len(devices)
        load = np.zeros((K, D), np.float32)
        mem = np.zeros((K, D), np.float32)
        flow = np.zeros((K, G, D), np.float32)
        progress = np.float32(0.0)
        finish = np.zeros((K, G), np.float32)  # when each placed group finishes (fair shares)
        where = np.zeros((K, G), np.int64)
        ready = np.zeros((K, D), np.float32)  # when each device is free
    # Decoding is matrix products, so every product with the encoder states that does not change from step
    # to step is taken once here, in float64 as the step's products are: the attention's query-key map, and
    # what the attended context adds to the gates and to the output (the context itself is not needed);
    # the previous device's projection is a row of dev @ w_prev. A third fewer operations per step.
    H = hidden
    query_keys = att_dec.astype(np.float64) @ keys.astype(np.float64).T  # [H, G]
    attended = enc.astype(np.float64) @ np.concatenate([w_ctx, out_w[H:]], 1).astype(np.float64)  # [G, 5H]
    out_h = out_w[:H]
    prev_proj = prev @ w_prev  # [K, 4H] for the go symbol; then rows of dev_proj
    dev_proj = dev @ w_prev  # [D, 4H]
    for t in range(G):
        scores = (h @ query_keys) * att_scale  # [K, G]
        scores -= scores.max(axis=1, keepdims=True)
        p = np.exp(scores)
        p /= p.sum(axis=1, keepdims=True)
        from_ctx = p @ attended  # [K, 5H]: the context's part of the gates, then of the output
        gates = own_proj[t] + prev_proj + from_ctx[:, :4 * H] + h @ w_h + b_dec
        c = _sigmoid(gates[:, H:2 * H]) * c + _sigmoid(gates[:, :H]) * np.tanh(gates[:, 2 * H:3 * H])
        h = _sigmoid(gates[:, 3 * H:]) * np.tanh(c)
        o_ = np.tanh(h @ out_h + from_ctx[:, 4 * H:] + out_b)
        logits = o_ @ dev.T  # [K, D]
        if load_w is not None:
            fin, delay = finish_delay(finish, where, ready, t, context)
            feats = load_features(load, mem, flow[:, t, :], progress, context.memory[t], context.capacity,
                                  context.slowness[t], delay)
            logits = logits + np.einsum("kds,ks->kd", feats, o_ @ load_w.T)
        logits = logits * scale
        logits = logits - logits.max(axis=1, keepdims=True)
        logq = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        if actions is not None:
            a = np.asarray(actions)[:, t].astype(np.int64)
        elif greedy:
            a = logq.argmax(axis=1)
        else:  # Gumbel-max: a sample of softmax (no noise on greedy rows)
            noise = rng.gumbel(size=(K - greedy_rows, logq.shape[1]))
            if greedy_rows:
                noise = np.concatenate([np.zeros((greedy_rows, logq.shape[1])), noise])
            a = (logq + noise).argmax(axis=1)
        logp += logq[np.arange(K), a]
        prev_proj = dev_proj[a]
        out[:, t] = a
        if load_w is not None:
            rows = np.arange(K)
            load[rows, a] += context.compute[t]
            mem[rows, a] += context.memory[t]
            flow[rows, :, a] += context.inflow[t]
            progress += context.compute[t]
            finish[:, t] = fin[rows, a]
            where[:, t] = a
            ready[rows, a] = fin[rows, a]
    return out, logp
