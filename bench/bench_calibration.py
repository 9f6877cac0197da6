"""Benchmark: simulated single-GPU training steps against published and measured ones.

For each row, a Keras application's training step (`placer import-keras`:
weights=None, SGD with momentum, batch as published) is simulated with every
op on the first GPU of the preset that models the row's GPU, and compared
with the published (or measured) step time, batch / throughput. The ratio is
simulated / real: above 1 the simulator is slower than the machine. A row
whose run fit its GPU must not be flagged OOM: peak memory is checked against
that GPU's usable memory (`usable_memory`).

Rows:

- published: TensorFlow training throughput on one GPU, each with its source;
- measured: ``python -m bench.gpu_facts`` (PyTorch eager, cudnn.benchmark)
  on a lent NVIDIA H100 80GB HBM3, the ``dgx-h100`` preset's GPU
  (bench/results/gpu_facts_h100.json), and on a lent H200, the ``dgx-h200``
  preset's GPU (gpu_facts_h200.json). The H200 has the H100 SXM's compute and
  1.43x its memory bandwidth (4.8 against 3.35 TB/s), so each H200 row also
  records ``ratio_on_dgx_h100``: what the bandwidth alone moves.

A row's ``mode`` says which rates its matrix ops use: ``preset`` (the
preset's, TF32 on A100 and H100 as TensorFlow runs them by default) or
``fp32`` (TF32 off: matrix ops at the GPU's FP32 rate x
`placer.machines.FP32_MATRIX_EFFICIENCY`).

Graphs are imported once (TensorFlow, about a minute each) and cached in
``data/calibration/`` (git-ignored); the bench itself takes seconds.

Run: .venv/bin/python -m bench.bench_calibration  (writes bench/results/calibration.json)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from placer import machines, presets  # noqa: E402
from placer.cluster import Cluster  # noqa: E402
from placer.graph_io import load_graph, save_graph  # noqa: E402
from placer.simulator import Simulator  # noqa: E402

RESULTS = Path(__file__).parent / "results"
CACHE = Path(__file__).parent.parent / "data" / "calibration"
GIB = 2**30

TF_RESERVE = 15.78 * GIB - 14684 * 2**20
"""Memory TensorFlow leaves out of a card's total: a V100-SXM2-16GB reports ``totalMemory: 15.78GiB`` and
TensorFlow creates its device ``with 14684 MB memory`` (keras-team/keras-io, examples/vision/md/
swin_transformers.md); `usable_memory` takes the same reserve from other cards."""

DLE_RN50 = ("https://github.com/NVIDIA/DeepLearningExamples/blob/1d4211fe9d94550d7bc72bb9b0ac4f576533ca52/"
            "TensorFlow/Classification/ConvNets/resnet50v1.5/README.md (Training performance results; "
            "TensorFlow 20.06-tf1-py3 NGC container, training_perf.sh, averaged over an epoch)")
LAMBDA = ("https://github.com/LambdaColdStorage/lambda-tensorflow-benchmark/blob/"
          "70dcdbdd13ce5281d830950175fe6b35a0eddaa5/summary/tf-train-throughput-fp32.csv and "
          "summary/tf-train-bs-fp32.csv (tf_cnn_benchmarks, synthetic data)")
GPU_FACTS = "python -m bench.gpu_facts (bench/results/gpu_facts_h200.json)"
GPU_FACTS_H100 = "python -m bench.gpu_facts (bench/results/gpu_facts_h100.json)"

PUBLISHED = [
    dict(model="resnet50", batch=128, precision="FP32 + XLA", framework="TensorFlow 1.15 (NGC 20.06)",
         gpu="V100-SXM2-16GB (DGX-1)", gpu_memory_gib=15.78, throughput=412, preset="8gpu-nvlink", mode="preset",
         source=DLE_RN50, note="ResNet-50 v1.5 (stride in the 3x3 conv: ~6% more FLOPs than Keras' v1)"),
    dict(model="resnet50", batch=128, precision="FP32 + XLA", framework="TensorFlow 1.15 (NGC 20.06)",
         gpu="V100-SXM3-32GB (DGX-2)", gpu_memory_gib=31.72, throughput=432, preset="8gpu-nvlink", mode="preset",
         source=DLE_RN50, note="ResNet-50 v1.5; DGX-2's V100 runs at higher clocks than DGX-1's"),
    dict(model="resnet50", batch=256, precision="TF32 + XLA", framework="TensorFlow 1.15 (NGC 20.06)",
         gpu="A100-SXM4-40GB (DGX A100)", gpu_memory_gib=39.59, throughput=909, preset="dgx-a100", mode="preset",
         source=DLE_RN50, note="ResNet-50 v1.5; the preset's A100 80 GB has 2,039 GB/s against 1,555"),
    dict(model="resnet50", batch=192, precision="FP32", framework="TensorFlow 2.2, tf_cnn_benchmarks",
         gpu="V100-SXM3-32GB", gpu_memory_gib=31.72, throughput=432, preset="8gpu-nvlink", mode="preset",
         source=LAMBDA, note="tf_cnn_benchmarks' resnet50 (v1)"),
    dict(model="inception_v3", batch=192, precision="FP32", framework="TensorFlow 2.2, tf_cnn_benchmarks",
         gpu="V100-SXM3-32GB", gpu_memory_gib=31.72, throughput=273, preset="8gpu-nvlink", mode="preset",
         source=LAMBDA, note=""),
    dict(model="vgg16", batch=192, precision="FP32", framework="TensorFlow 2.2, tf_cnn_benchmarks",
         gpu="V100-SXM3-32GB", gpu_memory_gib=31.72, throughput=249, preset="8gpu-nvlink", mode="preset",
         source=LAMBDA, note="all 3x3 stride-1 convolutions: cuDNN's Winograd beats the direct-FLOP rate"),
    dict(model="resnet50", batch=224, precision="FP32 (TF 2.3: no TF32)", framework="TensorFlow 2.3, tf_cnn_benchmarks",
         gpu="A100-SXM4-40GB", gpu_memory_gib=39.59, throughput=572, preset="dgx-a100", mode="fp32",
         source=LAMBDA, note="TF32 came to TensorFlow in 2.4; 572 img/s is 1.32x the V100's, as FP32 rates are"),
    dict(model="inception_v3", batch=224, precision="FP32 (TF 2.3: no TF32)",
         framework="TensorFlow 2.3, tf_cnn_benchmarks", gpu="A100-SXM4-40GB", gpu_memory_gib=39.59, throughput=380,
         preset="dgx-a100", mode="fp32", source=LAMBDA, note=""),
    dict(model="vgg16", batch=224, precision="FP32 (TF 2.3: no TF32)", framework="TensorFlow 2.3, tf_cnn_benchmarks",
         gpu="A100-SXM4-40GB", gpu_memory_gib=39.59, throughput=364, preset="dgx-a100", mode="fp32",
         source=LAMBDA, note="all 3x3 stride-1 convolutions: cuDNN's Winograd beats the direct-FLOP rate"),
]

H200 = "H200 141GB HBM3e (the dgx-h200 preset's GPU)"
H100 = "H100 80GB HBM3 (the dgx-h100 preset's GPU)"
MEASURED = [
    dict(model="resnet50", batch=128, precision="FP32 (TF32 off)", step_s=0.12833, mode="fp32"),
    dict(model="resnet50", batch=128, precision="TF32", step_s=0.06177, mode="preset"),
    dict(model="inception_v3", batch=128, precision="TF32", step_s=0.11415, mode="preset"),
    dict(model="vgg16", batch=64, precision="TF32", step_s=0.04787, mode="preset"),
]
MEASURED_H100 = [
    dict(model="resnet50", batch=128, precision="FP32 (TF32 off)", step_s=0.13582, mode="fp32"),
    dict(model="resnet50", batch=128, precision="TF32", step_s=0.07200, mode="preset"),
    dict(model="inception_v3", batch=128, precision="TF32", step_s=0.12397, mode="preset"),
    dict(model="vgg16", batch=64, precision="TF32", step_s=0.05330, mode="preset"),
]
MEASURED_NOT_SIMULATED = [
    dict(model="LSTM LM 4x1024, seq 40, vocab 32k", batch=128, precision="TF32", step_s=0.0158),
    dict(model="BERT-base-sized encoder, seq 128", batch=32, precision="TF32", step_s=0.0361),
]


def usable_memory(card_gib: float) -> float:
    """Bytes TensorFlow can use on a card that reports `card_gib` GiB (less `TF_RESERVE`)."""
    return card_gib * GIB - TF_RESERVE


def graph_for(model: str, batch: int):
    """The Keras application's training step at `batch`, imported once and cached."""
    path = CACHE / f"{model}_b{batch}.json.gz"
    if not path.exists():
        from placer.importers.keras_models import keras_application

        print(f"importing {model} at batch {batch} (TensorFlow, about a minute)", file=sys.stderr, flush=True)
        CACHE.mkdir(parents=True, exist_ok=True)
        save_graph(keras_application(model, batch), path)
    return load_graph(path)


def one_gpu(preset: str, mode: str) -> Cluster:
    """The preset's first GPU alone, its matrix ops at FP32 rates in ``fp32`` mode."""
    gpu = next(d for d in presets.get(preset).devices if d.kind == "gpu")
    if mode == "fp32":
        gpu = replace(gpu, matrix_flops=None, matrix_efficiency=machines.FP32_MATRIX_EFFICIENCY)
    return Cluster(f"{preset}/{gpu.name}", [gpu])


def simulate(model: str, batch: int, preset: str, mode: str) -> tuple[float, float, int]:
    """(step seconds, peak bytes, ops) of the whole step on one GPU of `preset`."""
    graph = graph_for(model, batch)
    cluster = one_gpu(preset, mode)
    res = Simulator(graph, cluster).run(np.zeros(len(graph), dtype=np.int64))
    return res.step_time, float(res.peak_memory[0]), len(graph)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(RESULTS / "calibration.json"))
    args = parser.parse_args(argv)
    rows = []
    for r in PUBLISHED:
        real = r["batch"] / r["throughput"]
        sim, peak, n = simulate(r["model"], r["batch"], r["preset"], r["mode"])
        rows.append(dict(r, kind="published", real_step_s=real, simulated_step_s=sim, ratio=sim / real, ops=n,
                         peak_memory_gib=peak / GIB, usable_memory_gib=usable_memory(r["gpu_memory_gib"]) / GIB,
                         oom=peak > usable_memory(r["gpu_memory_gib"])))
    for r in MEASURED:
        sim, peak, n = simulate(r["model"], r["batch"], "dgx-h200", r["mode"])
        on_h100 = simulate(r["model"], r["batch"], "dgx-h100", r["mode"])[0]
        rows.append(dict(r, kind="measured", framework="PyTorch 2.11 eager, CUDA 13", gpu=H200, preset="dgx-h200",
                         source=GPU_FACTS, real_step_s=r["step_s"], simulated_step_s=sim, ratio=sim / r["step_s"],
                         ratio_on_dgx_h100=on_h100 / r["step_s"],
                         ops=n, peak_memory_gib=peak / GIB, usable_memory_gib=usable_memory(139.8) / GIB,
                         oom=peak > usable_memory(139.8)))
    for r in MEASURED_H100:
        sim, peak, n = simulate(r["model"], r["batch"], "dgx-h100", r["mode"])
        rows.append(dict(r, kind="measured", framework="PyTorch 2.11 eager, CUDA 13", gpu=H100, preset="dgx-h100",
                         source=GPU_FACTS_H100, real_step_s=r["step_s"], simulated_step_s=sim,
                         ratio=sim / r["step_s"], ops=n, peak_memory_gib=peak / GIB,
                         usable_memory_gib=usable_memory(79.19) / GIB, oom=peak > usable_memory(79.19)))
    within = [0.67 <= row["ratio"] <= 1.5 for row in rows]
    result = {
        "rows": rows,
        "measured_not_simulated": [dict(r, gpu=H200, source=GPU_FACTS, why="no Keras application of this model")
                                   for r in MEASURED_NOT_SIMULATED],
        "within_0.67_1.5": f"{sum(within)} of {len(rows)}",
        "any_oom": any(row["oom"] for row in rows),
        "geomean_ratio": float(np.exp(np.mean([np.log(row["ratio"]) for row in rows]))),
        "command": "python -m bench.bench_calibration",
    }
    for row in rows:
        flag = "" if 0.67 <= row["ratio"] <= 1.5 else "  MISS"
        h200 = f"  (x{row['ratio_on_dgx_h100']:.2f} on dgx-h100)" if "ratio_on_dgx_h100" in row else ""
        print(f"{row['kind']:9s} {row['model']:13s} b{row['batch']:<4d} {row['precision']:24s} {row['gpu'][:24]:24s} "
              f"real {row['real_step_s'] * 1e3:7.1f} ms  sim {row['simulated_step_s'] * 1e3:7.1f} ms  "
              f"x{row['ratio']:.2f}  peak {row['peak_memory_gib']:.1f}/{row['usable_memory_gib']:.1f} GiB"
              f"{'  OOM' if row['oom'] else ''}{flag}{h200}")
    print(f"within 0.67-1.5x: {result['within_0.67_1.5']}; geometric mean ratio {result['geomean_ratio']:.2f}")
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
