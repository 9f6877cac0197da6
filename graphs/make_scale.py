"""Build the scale family: GPT-style decoder training steps of 12 to 128 layers (9k to 93k ops).

    .venv/bin/python -m graphs.make_scale                   # every missing member, into graphs/scale/
    .venv/bin/python -m graphs.make_scale gpt128 --force    # rebuild one
    .venv/bin/python -m graphs.make_scale --list            # members and their sizes

Each member is one training step (forward, loss, backward, Adam update) of a
Keras GPT-style decoder (token and learned position embeddings, pre-norm
blocks of causal multi-head self-attention and a GELU MLP, a final layer
norm, an untied softmax over the suite's 32,768-word vocabulary), traced and
imported by `placer.importers.from_keras` as ``placer import-keras`` and
``placer import model.keras`` do (pruned, as they prune). Depth sets the op
count (725 ops per layer); widths are those of GPT-2's family, narrower
as depth grows so the step stays a few GiB of weights.

The members are generated on demand into ``graphs/scale/`` (git-ignored): the
128-layer step is 1.1 MiB gzipped and the family about 2.7 MiB, more than this
repo keeps for graphs no test needs (the tests build `TINY`). A member already present is skipped, so an
interrupted run resumes. Each file's ``meta`` records the model's sizes and
the seconds spent building the Keras model and tracing + importing its step
(``build_seconds``, ``import_seconds``).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path
from typing import NamedTuple

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
OUT = Path(__file__).resolve().parent / "scale"

from graphs.make_graphs import VOCAB  # noqa: E402  (the benchmark suite's vocabulary)


class Member(NamedTuple):
    """One GPT-style decoder of the family."""

    layers: int
    d_model: int
    heads: int
    seq_len: int = 256
    batch: int = 8
    vocab: int = VOCAB


FAMILY = {
    "gpt12": Member(12, 1024, 16),
    "gpt24": Member(24, 1024, 16),
    "gpt48": Member(48, 768, 12),
    "gpt96": Member(96, 512, 8),
    "gpt128": Member(128, 256, 4),
}
"""The family: 24 to 128 layers as the scale issue asks (d_model 1024 to 256), and 12 layers for a ~10k-op
row of `bench.bench_scale`."""
TINY = Member(2, 64, 2, seq_len=16, batch=2, vocab=512)
"""The tests' small version: the same blocks, two of them, at toy widths."""


def gpt(m: Member):
    """A GPT-style decoder-only language model of `m`'s sizes (Keras 3, untrained, no dropout)."""
    import keras
    from keras import layers as L

    class AddPositions(L.Layer):
        """Adds a learned embedding of each position."""

        def build(self, input_shape):
            self.table = self.add_weight(shape=tuple(input_shape[1:]), initializer="glorot_uniform", name="table")

        def call(self, x):
            return x + self.table[None]

    tokens = keras.Input((m.seq_len,), dtype="int32", name="tokens")
    x = AddPositions(name="positions")(L.Embedding(m.vocab, m.d_model, name="token_embedding")(tokens))
    for k in range(m.layers):
        h = L.LayerNormalization(name=f"block_{k}_ln1")(x)
        h = L.MultiHeadAttention(m.heads, m.d_model // m.heads, name=f"block_{k}_attention")(
            h, h, use_causal_mask=True)
        x = x + h
        h = L.LayerNormalization(name=f"block_{k}_ln2")(x)
        h = L.Dense(4 * m.d_model, activation="gelu", name=f"block_{k}_mlp1")(h)
        x = x + L.Dense(m.d_model, name=f"block_{k}_mlp2")(h)
    x = L.LayerNormalization(name="final_ln")(x)
    logits = L.Dense(m.vocab, name="softmax")(x)
    return keras.Model(tokens, logits, name=f"gpt{m.layers}")


def build(name: str, m: Member):
    """The training-step graph of member `m`, named `name`, with its sizes and timings in ``meta``."""
    import keras
    import tensorflow as tf

    from placer.importers import from_keras

    keras.backend.clear_session()
    keras.utils.set_random_seed(0)
    t0 = time.perf_counter()
    model = gpt(m)
    built = time.perf_counter() - t0

    def loss(y, p):
        return keras.losses.sparse_categorical_crossentropy(y, p, from_logits=True)

    meta = {"source_model": f"GPT-style decoder, {m.layers} layers, d_model {m.d_model}, {m.heads} heads, "
                            f"MLP {4 * m.d_model}, vocabulary {m.vocab}, {m.seq_len} tokens, batch {m.batch}",
            "family": "scale", "layers": m.layers, "d_model": m.d_model, "sequence_length": m.seq_len}
    t0 = time.perf_counter()
    g = from_keras(model, m.batch, optimizer=keras.optimizers.Adam(1e-4), loss=loss,
                   target_specs=[tf.TensorSpec((m.batch, m.seq_len), tf.int32)], name=name, meta=meta)
    g.meta["build_seconds"] = round(built, 2)
    g.meta["import_seconds"] = round(time.perf_counter() - t0, 2)
    return g


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"members to build (default all: {', '.join(FAMILY)}; "
                                                 "'tiny' is the tests' small version)")
    parser.add_argument("--out", default=str(OUT), help="output folder (default graphs/scale/)")
    parser.add_argument("--force", action="store_true", help="rebuild members that already exist")
    parser.add_argument("--list", action="store_true", help="print the members and exit")
    args = parser.parse_args(argv)
    members = {**FAMILY, "tiny": TINY}
    if args.list:
        for name, m in members.items():
            print(f"{name}: {m}")
        return 0
    unknown = [n for n in args.names if n not in members]
    if unknown:
        parser.error(f"unknown member(s) {', '.join(unknown)}; known: {', '.join(members)}")

    from placer.graph_io import save_graph

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in args.names or list(FAMILY):
        path = out / f"{name}.json.gz"
        if path.exists() and not args.force:
            print(f"{name}: {path} exists, skipped (--force rebuilds)", flush=True)
            continue
        g = build(name, members[name])
        save_graph(g, path)
        print(f"{name}: {len(g)} ops ({g.meta['tf_node_count']} TF nodes), model built in "
              f"{g.meta['build_seconds']:.1f} s, step traced and imported in {g.meta['import_seconds']:.1f} s, "
              f"{path.stat().st_size / 2**20:.2f} MiB", flush=True)
        del g
        gc.collect()
    return 0


if __name__ == "__main__":
    sys.exit(main())
