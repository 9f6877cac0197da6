"""Regenerate the benchmark graphs in this folder from real Keras/TensorFlow models.

    .venv/bin/python -m graphs.make_graphs              # all missing graphs
    .venv/bin/python -m graphs.make_graphs nmt rnnlm    # just these
    .venv/bin/python -m graphs.make_graphs --force      # rebuild even if present

Each graph is one training step (forward, loss, backward, optimizer update)
traced as a `tf.function` with fixed shapes and imported with
`placer.importers` (no weights are downloaded: Keras applications are built
with ``weights=None``). Each file's ``meta`` records the source model, batch,
sequence length, op count, total FLOPs, the forward pass's multiply-adds per
example, and whether the step fits in one GPU of the ``2gpu`` preset when
simulated all on ``/device:GPU:0``. Graphs already present are skipped, so an
interrupted run resumes where it stopped.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
HERE = Path(__file__).resolve().parent

PRUNE = False
"""The files here and in corpus/, and every figure measured on them, were imported before the importer left out the
nodes TensorFlow does not run (`placer.importers.graphdef`, "Pruning"; 0.2-1.2% of these graphs' one-GPU
time), so they are rebuilt with those nodes kept, as they were; `placer import-keras` prunes by default."""
VOCAB = 32768  # "tens of thousands": a 32k word-piece vocabulary, as in GNMT and the Transformer papers


# -- models ------------------------------------------------------------------------
def lstm_lm(vocab: int, units: int, layers: int, steps: int):
    """Word-level LSTM language model: embedding, stacked LSTMs unrolled over `steps`, softmax."""
    import keras

    tokens = keras.Input((steps,), dtype="int32", name="tokens")
    x = keras.layers.Embedding(vocab, units, name="embedding")(tokens)
    for k in range(layers):
        x = keras.layers.LSTM(units, return_sequences=True, unroll=True, name=f"lstm_{k}")(x)
    logits = keras.layers.Dense(vocab, name="softmax")(x)
    return keras.Model(tokens, logits, name="rnnlm")


def lstm_seq2seq(vocab: int, units: int, layers: int, src_len: int, tgt_len: int):
    """NMT encoder-decoder: stacked unrolled LSTMs each side, Luong (dot) attention, softmax.

    The decoder's layers start from the encoder's final states (layer by
    layer); attention reads all encoder outputs from the decoder's top layer
    (global attention without input feeding), and ``tanh(W [context; h])``
    feeds the output projection.
    """
    import keras

    src = keras.Input((src_len,), dtype="int32", name="source")
    tgt = keras.Input((tgt_len,), dtype="int32", name="target_in")
    x = keras.layers.Embedding(vocab, units, name="src_embedding")(src)
    states = []
    for k in range(layers):
        x, h, c = keras.layers.LSTM(units, return_sequences=True, return_state=True, unroll=True,
                                    name=f"encoder_{k}")(x)
        states.append([h, c])
    memory = x
    y = keras.layers.Embedding(vocab, units, name="tgt_embedding")(tgt)
    for k in range(layers):
        y = keras.layers.LSTM(units, return_sequences=True, unroll=True, name=f"decoder_{k}")(
            y, initial_state=states[k])
    context = keras.layers.Attention(name="attention")([y, memory])
    y = keras.layers.Concatenate(name="concat_context")([context, y])
    y = keras.layers.Dense(units, activation="tanh", name="attention_output")(y)
    logits = keras.layers.Dense(vocab, name="softmax")(y)
    return keras.Model([src, tgt], logits, name=f"nmt{layers}")


def transformer(vocab: int, d_model: int, heads: int, d_ff: int, layers: int, src_len: int, tgt_len: int):
    """Encoder-decoder Transformer ("big" sizes of Vaswani et al. 2017), learned positions, post-norm."""
    import keras
    from keras import layers as L

    class AddPositions(L.Layer):
        """Adds a learned embedding of each position."""

        def build(self, input_shape):
            self.table = self.add_weight(shape=tuple(input_shape[1:]), initializer="glorot_uniform", name="table")

        def call(self, x):
            return x + self.table[None]

    def embed(ids, length, name):
        tok = L.Embedding(vocab, d_model, name=f"{name}_tokens")(ids)
        return L.Dropout(0.1)(AddPositions(name=f"{name}_positions")(tok))

    def block(x, name, memory=None):
        a = L.MultiHeadAttention(heads, d_model // heads, dropout=0.1, name=f"{name}_self_attention")(
            x, x, use_causal_mask=memory is not None)
        x = L.LayerNormalization(name=f"{name}_ln1")(x + L.Dropout(0.1)(a))
        if memory is not None:
            a = L.MultiHeadAttention(heads, d_model // heads, dropout=0.1, name=f"{name}_cross_attention")(x, memory)
            x = L.LayerNormalization(name=f"{name}_ln2")(x + L.Dropout(0.1)(a))
        f = L.Dense(d_ff, activation="relu", name=f"{name}_ffn1")(x)
        f = L.Dense(d_model, name=f"{name}_ffn2")(f)
        return L.LayerNormalization(name=f"{name}_ln3")(x + L.Dropout(0.1)(f))

    src = keras.Input((src_len,), dtype="int32", name="source")
    tgt = keras.Input((tgt_len,), dtype="int32", name="target_in")
    x = embed(src, src_len, "src")
    for k in range(layers):
        x = block(x, f"encoder_{k}")
    y = embed(tgt, tgt_len, "tgt")
    for k in range(layers):
        y = block(y, f"decoder_{k}", memory=x)
    logits = L.Dense(vocab, name="softmax")(y)
    return keras.Model([src, tgt], logits, name="transformer")


# -- the suite -------------------------------------------------------------------------
def _sparse_ce(y, p):
    import keras

    return keras.losses.sparse_categorical_crossentropy(y, p, from_logits=True)


def _seq_step(model, batch: int, tgt_len: int, optimizer, name: str, meta: dict):
    import tensorflow as tf

    from placer.importers import from_keras

    return from_keras(model, batch, optimizer=optimizer, loss=_sparse_ce,
                      target_specs=[tf.TensorSpec((batch, tgt_len), tf.int32)], name=name, meta=meta,
                      prune=PRUNE)


def build(name: str):
    """(training-step graph, Keras model) of one benchmark graph."""
    import keras

    from placer.importers import application_model, from_keras

    if name in ("inception_v3", "resnet50"):
        side = 299 if name == "inception_v3" else 224
        model = application_model(name, (side, side, 3))
        meta = {"source_model": f"keras.applications.{'InceptionV3' if side == 299 else 'ResNet50'} "
                                f"(weights=None), {side}x{side}x3 images, 1000 classes",
                "sequence_length": None, "optimizer_note": "SGD, momentum 0.9"}
        g = from_keras(model, 32, loss="categorical_crossentropy", name=name, meta=meta, prune=PRUNE)
        return g, model
    if name == "rnnlm":
        steps = 20
        model = lstm_lm(VOCAB, 2048, 2, steps)
        meta = {"source_model": f"2-layer LSTM language model, 2048 units, vocabulary {VOCAB}, full softmax, "
                                f"unrolled {steps} steps (RNNLM of Mirhoseini et al. 2017)",
                "sequence_length": steps}
        return _seq_step(model, 64, steps, keras.optimizers.SGD(1.0), name, meta), model
    if name in ("nmt", "nmt4"):
        layers = 2 if name == "nmt" else 4
        length = 30
        model = lstm_seq2seq(VOCAB, 1024, layers, length, length)
        meta = {"source_model": f"LSTM encoder-decoder with Luong dot attention, {layers} layers each side, "
                                f"1024 units, vocabulary {VOCAB} (source and target), unrolled {length} source "
                                f"and {length} target steps (NMT of Mirhoseini et al. 2017, after GNMT)",
                "sequence_length": length}
        return _seq_step(model, 128, length, keras.optimizers.Adam(1e-3), name, meta), model
    if name == "transformer":
        length = 128
        model = transformer(VOCAB, 1024, 16, 4096, 6, length, length)
        meta = {"source_model": f"encoder-decoder Transformer, 6+6 layers, d_model 1024, 16 heads, d_ff 4096, "
                                f"dropout 0.1, vocabulary {VOCAB} (Transformer-big of Vaswani et al. 2017), "
                                f"{length} source and {length} target tokens",
                "sequence_length": length}
        return _seq_step(model, 64, length, keras.optimizers.Adam(1e-4), name, meta), model
    raise SystemExit(f"unknown graph {name!r}; known: {', '.join(GRAPHS)}")


GRAPHS = ["resnet50", "inception_v3", "rnnlm", "nmt", "nmt4", "transformer"]


def forward_macs_per_example(model) -> float:
    """Multiply-adds of one forward pass (matmuls, convolutions, einsums) per example, at batch 1."""
    from placer.importers import from_keras

    g = from_keras(model, 1, training=False, name="forward", prune=PRUNE)
    return g.meta["contraction_flops"] / 2


def memory_check(g) -> dict:
    """Peak memory of the step placed all on /device:GPU:0 of the 2gpu-flat preset (plain roofline, 15 GiB)."""
    import numpy as np

    from placer import presets
    from placer.simulator import Simulator

    cluster = presets.get("2gpu-flat")
    gpu0 = [d.name for d in cluster.devices].index("/device:GPU:0")
    res = Simulator(g, cluster).run(np.full(len(g), gpu0, dtype=np.int64))
    return {"one_gpu_peak_memory": float(res.peak_memory[gpu0]), "one_gpu_fits_2gpu_preset": not res.oom,
            "one_gpu_step_time": res.step_time}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"graphs to build (default all: {', '.join(GRAPHS)})")
    parser.add_argument("--out", default=str(HERE), help="output folder (default: this folder)")
    parser.add_argument("--force", action="store_true", help="rebuild graphs that already exist")
    parser.add_argument("--prune", action="store_true",
                        help="leave out the nodes TensorFlow would not run, as `placer import-keras` does (the "
                             "files here keep them; see PRUNE)")
    args = parser.parse_args(argv)
    global PRUNE
    PRUNE = PRUNE or args.prune

    import keras

    from placer.graph_io import save_graph

    for name in args.names or GRAPHS:
        path = Path(args.out) / f"{name}.json.gz"
        if path.exists() and not args.force:
            print(f"{name}: {path} exists, skipped (--force rebuilds)", flush=True)
            continue
        keras.backend.clear_session()
        keras.utils.set_random_seed(0)
        t0 = time.perf_counter()
        g, model = build(name)
        built = time.perf_counter() - t0
        g.meta["forward_macs_per_example"] = forward_macs_per_example(model)
        g.meta.update(memory_check(g))
        save_graph(g, path)
        print(f"{name}: {len(g)} ops ({g.meta['tf_node_count']} TF nodes), "
              f"{g.meta['total_flops'] / 1e12:.2f} TFLOP per step, "
              f"weights+optimizer {g.meta['variable_bytes'] / 2**30:.2f} GiB, "
              f"one-GPU peak {g.meta['one_gpu_peak_memory'] / 2**30:.1f} GiB "
              f"({'fits' if g.meta['one_gpu_fits_2gpu_preset'] else 'OOM'}), "
              f"built in {built:.1f} s, {path.stat().st_size / 2**20:.2f} MiB", flush=True)
        del g, model
        gc.collect()
    return 0


if __name__ == "__main__":
    sys.exit(main())
