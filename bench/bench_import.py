"""Benchmark: importing real TensorFlow graphs, FLOPs against published figures, grappler's per-op times.

Prints measured figures and writes them to bench/results/import.json (a
partial run, ``--quick`` or ``--skip-grappler``, to import-quick.json,
import-no-grappler.json or import-quick-no-grappler.json, so that it never
replaces the full run's figures README quotes).

1. The benchmark suite in graphs/: ops, TF nodes, FLOPs per step, forward
   multiply-adds per example, one-GPU peak memory on the 2gpu preset, and the
   time to load each file.
2. Import time of the Inception-V3 and ResNet-50 (batch 32) training steps:
   building the Keras model and tracing the step, importing the traced
   GraphDef (`from_graphdef`: TF shape inference + FLOPs + colocation), and
   `placer import` of the same GraphDef written to a .pb file. Target:
   Inception-V3 under 60 s.
3. Forward-pass multiply-adds per image of ResNet-50 (224x224) and
   Inception-V3 (299x299), counted by our FLOP rules (contractions only:
   conv, matmul), against the published ~4.1 G and ~5.7 G. Unit: multiply-adds
   (1 MAC = 2 FLOPs in our graphs' `flops`).
4. Per-op compute time: our roofline (placer/cost_model.py, a V100 of the 2gpu
   preset) against grappler's op-level estimate (`Cluster.MeasureCosts`,
   `compute_time` + `memory_time` of each op on a virtual V100 with the same
   peak rates), on the ResNet-50 training step all on one GPU.

Run: .venv/bin/python -m bench.bench_import [--quick] [--skip-grappler]
(--quick skips the Inception-V3 import timing.)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

RESULTS = Path(__file__).parent / "results"
GRAPHS = Path(__file__).resolve().parents[1] / "graphs"
PUBLISHED_GMACS = {"resnet50": 4.1, "inception_v3": 5.7}
INPUT_SIDE = {"resnet50": 224, "inception_v3": 299}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def bench_suite() -> list[dict]:
    """What each shipped graph holds, and how long it takes to load."""
    from placer.graph_io import load_graph

    rows = []
    for path in sorted(GRAPHS.glob("*.json.gz")):
        t0 = time.perf_counter()
        g = load_graph(path)
        t_load = time.perf_counter() - t0
        m = g.meta
        row = {
            "graph": g.name, "ops": len(g), "edges": g.num_edges, "tf_nodes": m.get("tf_node_count"),
            "batch": m.get("batch_size"), "sequence_length": m.get("sequence_length"),
            "tflop_per_step": m["total_flops"] / 1e12,
            "forward_gmacs_per_example": (m.get("forward_macs_per_example") or 0) / 1e9,
            "variable_gib": m.get("variable_bytes", 0) / 2**30,
            "one_gpu_peak_gib": m.get("one_gpu_peak_memory", 0) / 2**30,
            "fits_one_gpu": m.get("one_gpu_fits_2gpu_preset"),
            "flops_fallback_ops": m.get("flops_fallback_ops"),
            "file_mib": path.stat().st_size / 2**20, "load_seconds": t_load,
        }
        rows.append(row)
        log(f"  {row['graph']:13s} {row['ops']:6d} ops ({row['tf_nodes']} TF nodes), "
            f"{row['tflop_per_step']:.2f} TFLOP/step, fwd {row['forward_gmacs_per_example']:.2f} GMAC/example, "
            f"one-GPU peak {row['one_gpu_peak_gib']:.1f} GiB ({'fits' if row['fits_one_gpu'] else 'OOM'}), "
            f"{row['file_mib']:.2f} MiB, loads in {t_load:.2f} s")
    return rows


def bench_import_time(app: str) -> dict:
    """Seconds to trace and import a Keras application's training step (batch 32)."""
    import keras

    from placer.importers import application_model, import_file, keras_step
    from placer.importers.graphdef import from_graphdef

    keras.backend.clear_session()
    side = INPUT_SIDE[app]
    t0 = time.perf_counter()
    model = application_model(app, (side, side, 3))
    step = keras_step(model, 32, loss="categorical_crossentropy")
    graph_def = step.graph_def()
    t_trace = time.perf_counter() - t0
    t0 = time.perf_counter()
    g = from_graphdef(graph_def, app)
    t_import = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        pb = Path(tmp) / f"{app}.pb"
        pb.write_bytes(graph_def.SerializeToString())
        t0 = time.perf_counter()
        g2 = import_file(pb)
        t_file = time.perf_counter() - t0
    assert len(g2) == len(g)
    log(f"  {app} (batch 32): build+trace {t_trace:.1f} s, import GraphDef {t_import:.1f} s, "
        f"total {t_trace + t_import:.1f} s; import from .pb file {t_file:.1f} s; "
        f"{len(g)} ops from {len(graph_def.node)} TF nodes")
    return {"graph": app, "batch": 32, "trace_seconds": t_trace, "import_seconds": t_import,
            "total_seconds": t_trace + t_import, "import_pb_file_seconds": t_file,
            "ops": len(g), "tf_nodes": len(graph_def.node)}


def bench_forward_flops(app: str) -> dict:
    """Forward-pass multiply-adds per image vs the published figure."""
    import keras

    from placer.importers import application_model, from_keras

    keras.backend.clear_session()
    side = INPUT_SIDE[app]
    g = from_keras(application_model(app, (side, side, 3)), 1, training=False, name=app)
    gmacs = g.meta["contraction_flops"] / 2 / 1e9
    all_gflops = g.meta["total_flops"] / 1e9
    pub = PUBLISHED_GMACS[app]
    log(f"  {app} forward, {side}x{side}: {gmacs:.3f} G multiply-adds per image (conv + matmul) "
        f"vs published ~{pub} G: ratio {gmacs / pub:.3f}; all ops {all_gflops:.2f} GFLOP")
    return {"graph": app, "input": side, "gmacs_per_image": gmacs, "published_gmacs": pub,
            "ratio": gmacs / pub, "forward_gflop_all_ops": all_gflops, "unit": "multiply-adds (1 MAC = 2 FLOP)"}


def bench_grappler(app: str = "resnet50", batch: int = 32) -> dict:
    """Per-op times: our roofline vs grappler's op-level estimator, a training step on one V100."""
    import numpy as np
    import tensorflow as tf  # noqa: F401
    from tensorflow.core.protobuf import device_properties_pb2, meta_graph_pb2
    from tensorflow.python.grappler import cluster as gcluster
    from tensorflow.python.grappler import item as gitem

    from placer import presets
    from placer.cost_model import op_time_matrix
    from placer.importers import application_model, keras_step
    from placer.importers.graphdef import from_graphdef

    step = keras_step(application_model(app), batch, loss="categorical_crossentropy")
    cf = step.concrete_function()
    graph_def = cf.graph.as_graph_def(add_shapes=True)
    g = from_graphdef(graph_def, app)
    cluster = presets.get("2gpu")
    gpu0 = [d.name for d in cluster.devices].index("/device:GPU:0")
    ours = op_time_matrix(g, cluster)[:, gpu0]

    # grappler's shape inference, like TF's, cannot see the shapes of variables captured as
    # resource placeholders; give it the same stand-ins our importer uses (VarHandleOps)
    from placer.importers.shapes import with_variable_shapes

    shaped = with_variable_shapes(graph_def)
    tf_gpu = "/job:localhost/replica:0/task:0/device:GPU:0"
    for node in shaped.node:
        node.device = tf_gpu
    mg = meta_graph_pb2.MetaGraphDef(graph_def=shaped)
    fetch = [t.op.name for t in cf.graph.outputs] + [op.name for op in cf.graph.control_outputs]
    mg.collection_def["train_op"].node_list.value.extend(fetch)
    item = gitem.Item(metagraph=mg, ignore_colocation=True, ignore_user_placement=False)
    dev = cluster.devices[gpu0]
    # 80 SMs x 64 FP32 cores x 2 (FMA) x 1.38 GHz = 14.1 TFLOP/s; 900 GB/s (bandwidth is in KB/s)
    v100 = device_properties_pb2.DeviceProperties(
        type="GPU", vendor="NVIDIA", model="Tesla V100", frequency=1380, num_cores=80,
        environment={"architecture": "7.0", "cuda": "11000", "cudnn": "8000"},
        num_registers=65536, l1_cache_size=24576, l2_cache_size=6291456,
        shared_memory_size_per_multiprocessor=98304, memory_size=16 * 2**30,
        bandwidth=int(dev.memory_bandwidth / 1e3))
    gc = gcluster.Cluster(devices=[device_properties_pb2.NamedDevice(name=tf_gpu, properties=v100)])
    op_perfs, grappler_step, _ = gc.MeasureCosts(item)
    theirs = {}
    for perf in op_perfs:
        # OpPerformance times are in nanoseconds; compute and memory time as grappler reports them
        theirs[perf.node] = (perf.compute_time + perf.memory_time) * 1e-9, perf.compute_time * 1e-9, perf.op.op
    names = [op.name for op in g if op.name in theirs]
    idx = np.array([g.index[n] for n in names])
    a = ours[idx] - dev.op_overhead  # grappler's per-op time has no launch overhead
    b = np.array([theirs[n][0] for n in names])
    types = [g[n].op for n in names]

    def summary(mask) -> dict:
        x, y = a[mask], b[mask]
        keep = (x > 0) & (y > 0)
        x, y = x[keep], y[keep]
        if len(x) < 2:
            return {"ops": int(len(x))}
        ratio = x / y
        rank_x, rank_y = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
        return {"ops": int(len(x)), "median_ratio_ours_over_grappler": float(np.median(ratio)),
                "within_2x": float(np.mean((ratio > 0.5) & (ratio < 2))),
                "spearman": float(np.corrcoef(rank_x, rank_y)[0, 1]),
                "sum_ours_s": float(x.sum()), "sum_grappler_s": float(y.sum())}

    mask_all = np.ones(len(names), dtype=bool)
    contraction = np.array([t.startswith("Conv2D") or t == "MatMul" for t in types])
    out = {"graph": f"{app} training step, batch {batch}, all on one V100",
           "matched_ops": len(names), "grappler_ops": len(op_perfs),
           "all": summary(mask_all), "conv_and_matmul": summary(contraction),
           "other": summary(~contraction), "grappler_step_time": grappler_step}
    by_type = {}
    for t in sorted(set(types)):
        m = np.array([x == t for x in types])
        if m.sum() >= 20:
            by_type[t] = summary(m)
    out["by_type"] = by_type
    for key in ("all", "conv_and_matmul", "other"):
        s = out[key]
        if "spearman" in s:
            log(f"  {key:16s} {s['ops']:5d} ops: median ours/grappler {s['median_ratio_ours_over_grappler']:.2f}, "
                f"{100 * s['within_2x']:.0f}% within 2x, Spearman {s['spearman']:.2f}, "
                f"sum ours {s['sum_ours_s'] * 1e3:.1f} ms vs grappler {s['sum_grappler_s'] * 1e3:.1f} ms")
    for t, s in by_type.items():
        if "spearman" in s:
            log(f"    {t:22s} {s['ops']:5d} ops: median ratio {s['median_ratio_ours_over_grappler']:.2f}, "
                f"{100 * s['within_2x']:.0f}% within 2x")
    return out


def results_file(quick: bool, skip_grappler: bool) -> Path:
    """Where a run writes: import.json for the full run, a file of its own for a partial one."""
    return RESULTS / ("import" + ("-quick" if quick else "") + ("-no-grappler" if skip_grappler else "") + ".json")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the Inception-V3 import timing")
    parser.add_argument("--skip-grappler", action="store_true")
    args = parser.parse_args()
    out: dict = {"machine": f"{os.cpu_count()} cores"}
    log("benchmark graphs (graphs/*.json.gz):")
    out["suite"] = bench_suite()
    log("import time, training step:")
    out["import_time"] = [bench_import_time(app) for app in
                          (["resnet50"] if args.quick else ["inception_v3", "resnet50"])]
    log("forward FLOPs vs published:")
    out["forward_flops"] = [bench_forward_flops(app) for app in ("resnet50", "inception_v3")]
    if not args.skip_grappler:
        log("per-op time, our roofline vs grappler:")
        out["grappler"] = bench_grappler()
    RESULTS.mkdir(exist_ok=True)
    path = results_file(args.quick, args.skip_grappler)
    path.write_text(json.dumps(out, indent=1))
    log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    from placer.cli.common import run_script

    run_script(main, "bench_import", "nothing is kept: run it again")
