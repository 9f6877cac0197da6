"""The placement policy: a seq2seq network that reads groups and writes devices.

After Mirhoseini et al. (ICML 2017): a bidirectional LSTM encodes the groups
in topological order; an LSTM decoder with content-based (scaled dot-product, Luong-style) attention
over the encoder states emits one device per group, reading back the device it
chose for the previous group. Two changes let one policy serve any graph and
any cluster:

- groups are read through size-free features (`placer.rl.features`), never
  through names or ids;
- the softmax over devices is a dot product between the decoder's output and
  one embedding per device, built from the device's features plus a learned
  slot embedding (so identical GPUs stay distinguishable). The number of
  devices is therefore an input, up to `MAX_DEVICES`.

Optionally (``load_aware``, after Placeto's view of the placement so far) each
device's embedding at step t also reads how loaded the device already is:
compute and memory placed on it, how much of group t's input it holds,
how much slower group t runs there than on its fastest device, and how much
later it would finish there than on the device where it would finish first
(an earliest-finish-time estimate over the groups placed so far,
`placer.rl.features.finish_delay`; `placer.rl.features.load_features`).
That is what a list scheduler decides by, and unlike the LSTM's memory of earlier choices it means the same on
every graph. Its weights start at zero, so a policy trained without it
behaves the same until trained with it.

Every pass is compiled with ``tf.function(jit_compile=True)``: XLA turns the
decoder loop into one kernel, which is what makes a step cheap on a CPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import tensorflow as tf

from placer.rl.features import NUM_LOAD_FEATURES, DecodeContext

MAX_DEVICES = 64


@dataclass(frozen=True)
class PolicyConfig:
    """Sizes of the policy network."""

    group_features: int
    """Width of one group's feature vector (`placer.rl.features.NUM_GROUP_FEATURES`)."""
    device_features: int
    """Width of one device's feature vector (`placer.rl.features.NUM_DEVICE_FEATURES`)."""
    hidden: int = 64
    """LSTM units of the encoder (per direction) and of the decoder."""
    attention: int = 64
    """Width of the attention's hidden layer."""
    load_aware: bool = False
    """Device embeddings also read the devices' load so far (module docstring); decoding then needs a
    `placer.rl.features.DecodeContext`."""


class LSTMState(NamedTuple):
    hidden: tf.Tensor
    cell: tf.Tensor


class Decoded(NamedTuple):
    """What a decoder pass returns, for K placements of G groups."""

    actions: tf.Tensor  # [K, G] int32 device per group
    log_prob: tf.Tensor  # [K] sum over groups of log p(action)
    entropy: tf.Tensor  # [K] mean over groups of the softmax's entropy


def _glorot(shape, name):
    return tf.Variable(tf.keras.initializers.GlorotUniform()(shape), name=name)


class _LSTMCell(tf.Module):
    """An LSTM cell: ``__call__(x [B, I], state) -> (h [B, H], state)``."""

    def __init__(self, input_size: int, hidden: int, name: str):
        super().__init__(name=name)
        self.hidden = hidden
        self.w = _glorot([input_size + hidden, 4 * hidden], "w")
        # forget-gate bias 1: remember by default (Jozefowicz et al., 2015)
        self.b = tf.Variable(tf.concat([tf.zeros([hidden]), tf.ones([hidden]), tf.zeros([2 * hidden])], 0),
                             name="b")

    def initial_state(self, batch: tf.Tensor) -> LSTMState:
        z = tf.zeros(tf.stack([batch, self.hidden]))
        return LSTMState(z, z)

    def __call__(self, x: tf.Tensor, state: LSTMState) -> tuple[tf.Tensor, LSTMState]:
        gates = tf.matmul(tf.concat([x, state.hidden], 1), self.w) + self.b
        i, f, g, o = tf.split(gates, 4, axis=1)
        c = tf.sigmoid(f) * state.cell + tf.sigmoid(i) * tf.tanh(g)
        h = tf.sigmoid(o) * tf.tanh(c)
        return h, LSTMState(h, c)


class PlacementPolicy(tf.Module):
    """Seq2seq placement policy; see the module docstring.

    Parameters
    ----------
    config : network sizes.
    seed : initialises the weights (same seed, same network).
    """

    def __init__(self, config: PolicyConfig, seed: int = 0, name: str = "policy"):
        super().__init__(name=name)
        self.config = config
        H, A = config.hidden, config.attention
        tf.keras.utils.set_random_seed(seed)
        self.embed_w = _glorot([config.group_features, H], "embed_w")
        self.embed_b = tf.Variable(tf.zeros([H]), name="embed_b")
        self.fwd = _LSTMCell(H, H, "encoder_fwd")
        self.bwd = _LSTMCell(H, H, "encoder_bwd")
        self.dev_w = _glorot([config.device_features, H], "device_w")
        self.dev_b = tf.Variable(tf.zeros([H]), name="device_b")
        self.dev_slot = tf.Variable(tf.random.normal([MAX_DEVICES, H], stddev=0.1), name="device_slot")
        self.go = tf.Variable(tf.zeros([H]), name="go")
        # decoder input: [group's encoding (2H), previous device (H), attention context (2H)]
        self.dec = _LSTMCell(5 * H, H, "decoder")
        self.att_enc = _glorot([2 * H, A], "attention_enc")
        self.att_dec = _glorot([H, A], "attention_dec")
        self.out_w = _glorot([3 * H, H], "out_w")
        self.out_b = tf.Variable(tf.zeros([H]), name="out_b")
        if config.load_aware:
            self.load_w = tf.Variable(tf.zeros([NUM_LOAD_FEATURES, H]), name="load_w")

    # -- building blocks ---------------------------------------------------
    def encode(self, groups: tf.Tensor) -> tf.Tensor:
        """Encoder states ``[G, 2H]`` of group features ``[G, F]`` (topological order)."""
        x = tf.tanh(tf.matmul(groups, self.embed_w) + self.embed_b)
        return tf.concat([self._run(self.fwd, x), tf.reverse(self._run(self.bwd, tf.reverse(x, [0])), [0])], 1)

    @staticmethod
    def _run(cell: _LSTMCell, x: tf.Tensor) -> tf.Tensor:
        n = tf.shape(x)[0]
        out = tf.TensorArray(tf.float32, size=n)
        state = cell.initial_state(1)
        for t in tf.range(n):
            h, state = cell(x[t][None, :], state)
            out = out.write(t, h[0])
        return out.stack()

    def embed_devices(self, devices: tf.Tensor) -> tf.Tensor:
        """Device embeddings ``[D, H]`` from device features ``[D, F_d]``."""
        d = tf.shape(devices)[0]
        return tf.tanh(tf.matmul(devices, self.dev_w) + self.dev_b) + self.dev_slot[:d]

    def decode(self, groups: tf.Tensor, devices: tf.Tensor, num_samples: int, seed: tf.Tensor,
               actions: tf.Tensor | None = None, greedy: bool = False,
               temperature: tf.Tensor | float = 1.0, context: DecodeContext | None = None) -> Decoded:
        """One decoder pass over all groups for `num_samples` placements at once.

        Parameters
        ----------
        groups : ``[G, F]`` group features.
        devices : ``[D, F_d]`` device features.
        num_samples : K, placements decoded side by side.
        seed : ``[2]`` int32 seed of the stateless sampler (same seed, same samples).
        actions : ``[K, G]`` devices to score instead of sampling (teacher forcing).
        greedy : take the most likely device instead of sampling.
        temperature : divides the logits (above 1 flattens the softmax; fine-tuning a confident
            pre-trained policy uses it to explore, `placer.rl.finetune`).
        context : the groups' `placer.rl.features.DecodeContext` (arrays or tensors); needed, and only
            read, when the policy is ``load_aware``.
        """
        load_aware = self.config.load_aware
        if load_aware and context is None:
            raise ValueError("a load-aware policy decodes with a DecodeContext")
        enc = self.encode(groups)  # [G, 2H]
        dev = self.embed_devices(devices)  # [D, H]
        keys = tf.matmul(enc, self.att_enc)  # [G, A]
        G = tf.shape(enc)[0]
        K = num_samples
        scale = tf.math.rsqrt(tf.cast(self.config.hidden, tf.float32))
        att_scale = tf.math.rsqrt(tf.cast(self.config.attention, tf.float32))
        state = self.dec.initial_state(K)
        prev = tf.tile(self.go[None, :], [K, 1])
        acts = tf.TensorArray(tf.int32, size=G)
        logp = tf.zeros([K])
        ent = tf.zeros([K])
        if load_aware:
            (inflow, compute, memory, capacity, slowness, duration, sent, link,
             latency) = (tf.convert_to_tensor(c, tf.float32) for c in context)
            D = tf.shape(dev)[0]
            num_devices = tf.cast(D, tf.float32)
            load = tf.zeros(tf.stack([K, D]))  # compute share placed on each device, per sample
            mem = tf.zeros(tf.stack([K, D]))  # memory placed on each device
            flow = tf.zeros(tf.stack([K, G, D]))  # share of each group's input bytes already on each device
            progress = tf.constant(0.0)
            finish = tf.zeros(tf.stack([K, G]))  # when each placed group finishes (fair shares)
            where = tf.zeros(tf.stack([K, G]), tf.int32)  # its device
            ready = tf.zeros(tf.stack([K, D]))  # when each device is free
            fin = tf.zeros(tf.stack([K, D]))  # when group t would finish on each device
        else:  # unused, but autograph's loop carries every name the loop body assigns
            load = mem = flow = progress = finish = ready = fin = tf.constant(0.0)
            where = tf.constant(0)
        for t in tf.range(G):
            # content-based attention on the previous decoder state (dot product, not additive:
            # the additive form stores a [K, G, A] tensor per step and made the backward pass 4x slower)
            q = tf.matmul(state.hidden, self.att_dec)  # [K, A]
            scores = tf.matmul(q, keys, transpose_b=True) * att_scale  # [K, G]
            ctx = tf.matmul(tf.nn.softmax(scores, -1), enc)  # [K, 2H]
            own = tf.tile(enc[t][None, :], [K, 1])
            h, state = self.dec(tf.concat([own, prev, ctx], 1), state)
            o = tf.tanh(tf.matmul(tf.concat([h, ctx], 1), self.out_w) + self.out_b)
            logits = tf.matmul(o, dev, transpose_b=True)  # [K, D]
            if load_aware:  # as placer.rl.features.finish_delay and load_features, in TensorFlow
                preds = tf.where(sent[:t, t] > 0)[:, 0]
                src = tf.gather(where, preds, axis=1)  # [K, P]
                cost = (tf.gather(sent[:, t], preds)[None, :, None] * tf.gather(link, src)
                        + tf.gather(latency, src))  # [K, P, D]
                arrive = tf.reduce_max(tf.gather(finish, preds, axis=1)[:, :, None] + cost, axis=1)
                fin = tf.maximum(ready, tf.maximum(arrive, 0.0)) + duration[t][None, :]  # [K, D]
                delay = tf.minimum(fin - tf.reduce_min(fin, -1, keepdims=True), 2.0)
                use = (mem + memory[t]) / capacity
                feats = tf.stack([load * num_devices - progress, tf.minimum(use, 2.0),
                                  tf.cast(use > 1.0, tf.float32), flow[:, t, :],
                                  tf.broadcast_to(slowness[t], tf.shape(load)), delay], -1)  # [K, D, S]
                logits += tf.einsum("kds,ks->kd", feats, tf.matmul(o, self.load_w, transpose_b=True))
            logits = logits * scale * 4.0 / temperature
            logq = tf.nn.log_softmax(logits, -1)
            if actions is not None:
                a = actions[:, t]
            elif greedy:
                a = tf.argmax(logits, -1, output_type=tf.int32)
            else:
                a = tf.random.stateless_categorical(logits, 1, seed + tf.stack([0, t]), dtype=tf.int32)[:, 0]
            logp += tf.gather(logq, a, batch_dims=1)
            ent -= tf.reduce_sum(tf.exp(logq) * logq, -1)
            prev = tf.gather(dev, a)
            acts = acts.write(t, a)
            if load_aware:
                chosen = tf.one_hot(a, D)  # [K, D]
                load += compute[t] * chosen
                mem += memory[t] * chosen
                flow += inflow[t][None, :, None] * chosen[:, None, :]
                progress += compute[t]
                fin_a = tf.gather(fin, a, batch_dims=1)  # [K]
                at_t = tf.one_hot(t, G)[None, :]
                finish += fin_a[:, None] * at_t
                where += a[:, None] * tf.cast(at_t, tf.int32)
                ready = ready * (1.0 - chosen) + fin_a[:, None] * chosen
        return Decoded(tf.transpose(acts.stack()), logp, ent / tf.cast(G, tf.float32))


def reinforce_update(policy: PlacementPolicy, optimizer, clip_norm: float, groups: tf.Tensor, devices: tf.Tensor,
                     actions: tf.Tensor, num_samples, advantage: tf.Tensor, entropy_weight: tf.Tensor,
                     temperature: tf.Tensor | float = 1.0,
                     context: DecodeContext | None = None) -> tuple[tf.Tensor, tf.Tensor, Decoded]:
    """One REINFORCE step on K scored placements; call it inside a `tf.function`.

    The loss is ``-mean(advantage * log p) - entropy_weight * G * mean(entropy)``:
    the entropy (a mean over the G groups) is scaled up to a sum, like the
    log-probability, so the bonus keeps its weight whatever the number of groups.

    Parameters
    ----------
    policy, optimizer : what is trained (`optimizer.apply(grads)` updates the
        policy's trainable variables).
    clip_norm : gradients are clipped to this global norm.
    groups, devices : ``[G, F]`` and ``[D, F_d]`` features.
    actions : ``[K, G]`` the sampled placements.
    num_samples : K (a Python int keeps the decoder's shapes static for XLA).
    advantage : ``[K]`` each placement's advantage.
    entropy_weight : scalar weight of the entropy bonus.
    temperature : of the softmax (`PlacementPolicy.decode`).
    context : the groups' `placer.rl.features.DecodeContext` (a load-aware policy's).

    Returns
    -------
    (loss, the gradients' global norm before clipping, the decoder pass scoring `actions`)
    """
    with tf.GradientTape() as tape:
        d = policy.decode(groups, devices, num_samples, tf.zeros([2], tf.int32), actions=actions,
                          temperature=temperature, context=context)
        num_groups = tf.cast(tf.shape(groups)[0], tf.float32)
        loss = -tf.reduce_mean(advantage * d.log_prob) - entropy_weight * num_groups * tf.reduce_mean(d.entropy)
    grads = tape.gradient(loss, policy.trainable_variables)
    grads, norm = tf.clip_by_global_norm(grads, clip_norm)
    optimizer.apply(grads)
    return loss, norm, d
