"""Regenerate the pre-training corpus: many real training-step graphs of different families and sizes.

    .venv/bin/python -m corpus.make_corpus                 # every missing graph, then the manifest
    .venv/bin/python -m corpus.make_corpus --list          # what it would build
    .venv/bin/python -m corpus.make_corpus mobilenet_96_b32 --force

Every graph is one training step (forward, loss, backward, optimizer update)
of a real Keras model, traced and imported by `placer.importers` exactly as
`python -m graphs.make_graphs` does (no weights are downloaded: ``weights=None``):
Keras applications at small input sizes and batches, and the benchmark suite's
own builders (LSTM language model, LSTM encoder-decoder, Transformer) at other
depths, widths, batches and sequence lengths.

Whole model FAMILIES are held out (`HELDOUT_FAMILIES`): no graph of those
families is ever trained on, so placing them measures what a pre-trained
policy does on architectures it has never seen. Four more families are the
validation split (`VALIDATION_FAMILIES`): not trained on, used only to choose
which checkpoint `placer pretrain` exports. ``manifest.json`` lists every
graph with its family, split, op count and file; `placer pretrain` reads it.
Graphs already present are skipped, so an interrupted run resumes.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")  # (else TensorFlow announces oneDNN on stderr)
HERE = Path(__file__).resolve().parent

from graphs import make_graphs  # noqa: E402  (the suite's builders and its PRUNE: the corpus is imported as the suite is)
from graphs.make_graphs import VOCAB as SUITE_VOCAB  # noqa: E402  (the benchmark suite's vocabulary)

MANIFEST = "manifest.json"
HELDOUT_FAMILIES = ("densenet", "efficientnet", "xception", "gru_lm")
"""Families never trained on: three convolutional architectures (dense connectivity, compound-scaled
inverted residuals with squeeze-excite, depthwise-separable Inception) and a recurrent one (GRU)."""
VALIDATION_FAMILIES = ("convnext", "nasnet", "inception_resnet", "bilstm")
"""Families never trained on either, but seen by `placer pretrain`: it exports the checkpoint whose greedy
placements are fastest on them. Zero-shot quality on unseen graphs swings by several percent between
checkpoints while the training graphs keep improving, so the choice needs graphs of its own; choosing
on the held-out families would leak them. Three are convolutional and one recurrent (a bidirectional LSTM),
as the placements that matter most are of both kinds."""


def _app(app: str, side: int, batch: int, classes: int = 100):
    def build():
        from placer.importers import keras_application

        return keras_application(app, batch, (side, side, 3), classes=classes, prune=make_graphs.PRUNE,
                                 meta={"corpus_input": f"{side}x{side}x3, {classes} classes, batch {batch}"})
    return build


def _lm(vocab: int, units: int, layers: int, steps: int, batch: int, cell: str = "lstm"):
    def build():
        import keras

        if cell == "lstm":
            model = make_graphs.lstm_lm(vocab, units, layers, steps)
        else:
            tokens = keras.Input((steps,), dtype="int32", name="tokens")
            x = keras.layers.Embedding(vocab, units, name="embedding")(tokens)
            for k in range(layers):
                x = keras.layers.GRU(units, return_sequences=True, unroll=True, name=f"gru_{k}")(x)
            model = keras.Model(tokens, keras.layers.Dense(vocab, name="softmax")(x), name="gru_lm")
        meta = {"source_model": f"{layers}-layer {cell.upper()} language model, {units} units, vocabulary {vocab}, "
                                f"unrolled {steps} steps, batch {batch}"}
        return make_graphs._seq_step(model, batch, steps, keras.optimizers.SGD(1.0), "lm", meta)
    return build


def _bilstm(vocab: int, units: int, layers: int, steps: int, batch: int):
    """Bidirectional LSTM language model (ELMo-like): both directions of every layer can run side by side."""
    def build():
        import keras

        tokens = keras.Input((steps,), dtype="int32", name="tokens")
        x = keras.layers.Embedding(vocab, units, name="embedding")(tokens)
        for k in range(layers):
            x = keras.layers.Bidirectional(keras.layers.LSTM(units, return_sequences=True, unroll=True),
                                           name=f"bilstm_{k}")(x)
        model = keras.Model(tokens, keras.layers.Dense(vocab, name="softmax")(x), name="bilstm_lm")
        meta = {"source_model": f"{layers}-layer bidirectional LSTM language model, {units} units each way, "
                                f"vocabulary {vocab}, unrolled {steps} steps, batch {batch}"}
        return make_graphs._seq_step(model, batch, steps, keras.optimizers.SGD(1.0), "bilstm", meta)
    return build


def _nmt(vocab: int, units: int, layers: int, length: int, batch: int):
    def build():
        import keras

        model = make_graphs.lstm_seq2seq(vocab, units, layers, length, length)
        meta = {"source_model": f"LSTM encoder-decoder with dot attention, {layers} layers, {units} units, "
                                f"vocabulary {vocab}, {length} steps, batch {batch}"}
        return make_graphs._seq_step(model, batch, length, keras.optimizers.Adam(1e-3), "nmt", meta)
    return build


def _transformer(vocab: int, d_model: int, heads: int, d_ff: int, layers: int, length: int, batch: int):
    def build():
        import keras

        model = make_graphs.transformer(vocab, d_model, heads, d_ff, layers, length, length)
        meta = {"source_model": f"Transformer {layers}+{layers} layers, d_model {d_model}, {heads} heads, "
                                f"d_ff {d_ff}, vocabulary {vocab}, {length} tokens, batch {batch}"}
        return make_graphs._seq_step(model, batch, length, keras.optimizers.Adam(1e-4), "transformer", meta)
    return build


# name -> (family, builder). Sizes keep each graph at a few thousand ops and the whole corpus at a few MB.
ENTRIES: dict[str, tuple[str, Callable[[], Any]]] = {
    # -- trained on ------------------------------------------------------------------
    "resnet50_64_b32": ("resnet", _app("resnet50", 64, 32)),
    "resnet50v2_96_b16": ("resnet", _app("resnet50v2", 96, 16)),
    "resnet101_64_b8": ("resnet", _app("resnet101", 64, 8)),
    "mobilenet_96_b32": ("mobilenet", _app("mobilenet", 96, 32)),
    "mobilenetv2_96_b64": ("mobilenet", _app("mobilenetv2", 96, 64)),
    "mobilenetv3small_128_b32": ("mobilenet", _app("mobilenetv3small", 128, 32)),
    "vgg16_64_b64": ("vgg", _app("vgg16", 64, 64)),
    "vgg19_96_b16": ("vgg", _app("vgg19", 96, 16)),
    "inception_v3_139_b16": ("inception", _app("inception_v3", 139, 16)),
    "lstm_lm_1x512_t16_b64": ("lstm_lm", _lm(8192, 512, 1, 16, 64)),
    "lstm_lm_2x1024_t12_b32": ("lstm_lm", _lm(16384, 1024, 2, 12, 32)),
    "lstm_lm_3x768_t10_b128": ("lstm_lm", _lm(16384, 768, 3, 10, 128)),
    "nmt_1x512_t12_b64": ("nmt", _nmt(8192, 512, 1, 12, 64)),
    "nmt_2x768_t16_b64": ("nmt", _nmt(16384, 768, 2, 16, 64)),
    "nmt_3x512_t10_b128": ("nmt", _nmt(8192, 512, 3, 10, 128)),
    "transformer_2l_d256_t32_b32": ("transformer", _transformer(8192, 256, 4, 1024, 2, 32, 32)),
    "transformer_3l_d512_t64_b16": ("transformer", _transformer(16384, 512, 8, 2048, 3, 64, 16)),
    # the same families at the benchmark suite's scale (its vocabulary, 768-2048 units, large batches),
    # where splitting over devices starts to pay; never the suite's own sizes
    "lstm_lm_2x1536_t16_b64": ("lstm_lm", _lm(SUITE_VOCAB, 1536, 2, 16, 64)),
    "lstm_lm_3x2048_t10_b32": ("lstm_lm", _lm(SUITE_VOCAB, 2048, 3, 10, 32)),
    "lstm_lm_4x1024_t12_b128": ("lstm_lm", _lm(SUITE_VOCAB, 1024, 4, 12, 128)),
    "nmt_2x1536_t16_b64": ("nmt", _nmt(SUITE_VOCAB, 1536, 2, 16, 64)),
    "nmt_3x1024_t20_b128": ("nmt", _nmt(SUITE_VOCAB, 1024, 3, 20, 128)),
    "nmt_4x768_t16_b128": ("nmt", _nmt(SUITE_VOCAB, 768, 4, 16, 128)),
    "transformer_4l_d1024_t64_b32": ("transformer", _transformer(SUITE_VOCAB, 1024, 16, 4096, 4, 64, 32)),
    "transformer_4l_d768_t96_b32": ("transformer", _transformer(SUITE_VOCAB, 768, 12, 3072, 4, 96, 32)),
    # convolutional families at the suite's scale (its 1000 classes, 160-256 px; never its own 224/299 px at
    # batch 32 for resnet50/inception_v3): the convolutional member of the shipped pool trains on these alone
    "resnet50_192_b32": ("resnet", _app("resnet50", 192, 32, 1000)),
    "resnet101_160_b16": ("resnet", _app("resnet101", 160, 16, 1000)),
    "inception_v3_224_b32": ("inception", _app("inception_v3", 224, 32, 1000)),
    "resnet50v2_224_b16": ("resnet", _app("resnet50v2", 224, 16, 1000)),
    "inception_v3_256_b16": ("inception", _app("inception_v3", 256, 16, 1000)),
    "mobilenetv2_224_b64": ("mobilenet", _app("mobilenetv2", 224, 64, 1000)),
    # -- validation (families never trained on; choose the exported checkpoint) -------
    "convnexttiny_64_b16": ("convnext", _app("convnexttiny", 64, 16)),
    "nasnetmobile_96_b16": ("nasnet", _app("nasnetmobile", 96, 16)),
    "inception_resnet_v2_96_b8": ("inception_resnet", _app("inception_resnet_v2", 96, 8)),
    "bilstm_2x1024_t16_b64": ("bilstm", _bilstm(SUITE_VOCAB, 1024, 2, 16, 64)),
    "bilstm_3x512_t12_b128": ("bilstm", _bilstm(16384, 512, 3, 12, 128)),
    # -- held out (families never trained on) ----------------------------------------
    "densenet121_64_b16": ("densenet", _app("densenet121", 64, 16)),
    "efficientnetb0_96_b32": ("efficientnet", _app("efficientnetb0", 96, 32)),
    "xception_96_b16": ("xception", _app("xception", 96, 16)),
    "gru_lm_2x1024_t16_b64": ("gru_lm", _lm(16384, 1024, 2, 16, 64, cell="gru")),
}


def split_of(family: str) -> str:
    """``"heldout"`` for a held-out family, ``"validation"`` for a validation family, else ``"train"``."""
    if family in HELDOUT_FAMILIES:
        return "heldout"
    return "validation" if family in VALIDATION_FAMILIES else "train"


def write_manifest(out: Path) -> dict[str, Any]:
    """manifest.json from the graphs present in `out` (facts read back from each file)."""
    from placer.fileio import write_atomic
    from placer.graph_io import load_graph

    graphs = []
    for name, (family, _) in ENTRIES.items():
        path = out / f"{name}.json.gz"
        if not path.exists():
            continue
        g = load_graph(path)
        graphs.append({"name": name, "family": family, "split": split_of(family), "path": path.name,
                       "num_ops": len(g), "total_flops": g.meta.get("total_flops"),
                       "source": g.meta.get("source_model") or g.meta.get("source")})
    manifest = {"format": 1, "heldout_families": list(HELDOUT_FAMILIES),
                "validation_families": list(VALIDATION_FAMILIES), "graphs": graphs}
    write_atomic(out / MANIFEST, (json.dumps(manifest, indent=1) + "\n").encode())
    return manifest


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="graphs to build (default: all)")
    parser.add_argument("--out", default=str(HERE / "graphs"), help="output folder (default corpus/graphs)")
    parser.add_argument("--force", action="store_true", help="rebuild graphs that already exist")
    parser.add_argument("--list", action="store_true", help="list the corpus and exit")
    parser.add_argument("--prune", action="store_true",
                        help="leave out the nodes TensorFlow would not run, as `placer import-keras` does (the "
                             "committed corpus keeps them; see make_graphs.PRUNE)")
    args = parser.parse_args(argv)
    make_graphs.PRUNE = make_graphs.PRUNE or args.prune
    unknown = [n for n in args.names if n not in ENTRIES]
    if unknown:
        parser.error(f"unknown graph(s) {unknown}; known: {', '.join(ENTRIES)}")
    if args.list:
        for name, (family, _) in ENTRIES.items():
            print(f"{name:32s} {family:14s} {split_of(family)}")
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    import keras

    from placer.graph_io import save_graph

    todo = args.names or list(ENTRIES)
    for k, name in enumerate(todo, 1):
        family, build = ENTRIES[name]
        path = out / f"{name}.json.gz"
        if path.exists() and not args.force:
            print(f"[{k}/{len(todo)}] {name}: exists, skipped", flush=True)
            continue
        keras.backend.clear_session()
        keras.utils.set_random_seed(0)
        t0 = time.perf_counter()
        g = build()
        g.name = name
        g.meta.update({"corpus_family": family, "corpus_split": split_of(family)})
        save_graph(g, path)
        print(f"[{k}/{len(todo)}] {name} ({family}, {split_of(family)}): {len(g)} ops, "
              f"{g.meta.get('total_flops', 0) / 1e9:.1f} GFLOP/step, built in {time.perf_counter() - t0:.1f} s, "
              f"{path.stat().st_size / 2**10:.0f} KiB", flush=True)
        del g
        gc.collect()
    manifest = write_manifest(out)
    print(f"wrote {out / MANIFEST}: {len(manifest['graphs'])} graphs "
          f"({sum(e['split'] == 'heldout' for e in manifest['graphs'])} held out)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
