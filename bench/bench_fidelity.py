"""Benchmark: does the simulator rank placements as real TensorFlow runs do?

For three training steps small enough for this machine (a small CNN, an
unrolled LSTM, a stack of ResNet-style blocks):

1. profile every op on this CPU (`placer.measure.profile`: one logical CPU,
   one thread, TF's step stats) and describe the machine with the ``local``
   preset (2 logical CPU devices of kind ``cpu-local``);
2. take 20+ placements: every registered heuristic, each single device,
   contiguous splits of the topological order, random placements of the
   colocation groups (and the RL placer's best, with ``--rl-steps``);
3. measure each for real (`placer.measure.runner.PlacedStep`, 2 logical CPUs,
   rounds interleaved over the placements so that load from other processes
   falls on all of them alike) and simulate each;
4. report per graph the Spearman rank correlation and the mean absolute
   percentage error (MAPE) between simulated and measured median step times
   (and against the 10th percentile, which other processes' load on this
   shared machine disturbs least).

The measurements are checked against themselves too (split-half Spearman
between even and odd rounds, the ceiling for any simulator): a 4 ms step
jitters by +-25% here, so with 36 steps per placement the CNN's placements,
mostly within 5% of each other, ranked at 0.29 against themselves. With 400
steps (100 rounds x 4) two runs gave 0.84 and 0.59 for the medians and 0.81
and 0.91 for the 10th percentiles, which is why both are reported.

Each graph's placements are simulated three ways on the same measurements:
``profiled`` (op costs profiled as above, the ``local`` preset: the headline
figures), ``roofline`` (no profile: roofline costs from the ``local``
preset's peaks) and ``calibrated`` (what ``placer profile`` writes, with its
roofline fit, on this machine as ``placer detect-cluster`` and ``placer
calibrate`` described it when that graph was measured: a calibration records
the machine's load of its moment, so each graph's result keeps its own). For each: Spearman, MAPE and the worst ratio
max(simulated / measured, measured / simulated) over the placements.

Targets: Spearman >= 0.8; ``calibrated`` within 1.5x of measured for every
placement of the LSTM and ResNet-block graphs (reported against the median
steps and against the 10th percentiles). Results go to bench/results/fidelity.json (one
graph at a time, so an interrupted run resumes where it stopped), a
scatter plot to bench/results/fidelity.png, and the graphs with their
profiles (which ``--resimulate`` reads) to bench/results/fidelity/: with
``--out X.json``, to X.png and X/ instead.

Run: .venv/bin/python -m bench.bench_fidelity --rl-steps 10 [--graphs cnn,lstm,resnet] [--rounds 100] [--force]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

from placer import presets  # noqa: E402
from placer.cli.common import check_at_least, output_file, run_script  # noqa: E402
from placer.errors import PlacerError, interrupted  # noqa: E402
from placer.fileio import write_atomic  # noqa: E402
from placer.graph import OpGraph  # noqa: E402
from placer.graph_io import load_graph, save_graph  # noqa: E402
from placer.placement import Placement  # noqa: E402
from placer.simulator import Simulator  # noqa: E402

from bench.fidelity_stats import mape, max_ratio, measurement_noise, plot, spearman  # noqa: E402

RESULTS = Path(__file__).parent / "results"
GRAPHS = ("cnn", "lstm", "resnet")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- the graphs ------------------------------------------------------------------
def build_graph(name: str, cache: Path) -> OpGraph:
    """A Keras training step as an OpGraph with its GraphDef embedded (cached in folder `cache`)."""
    path = cache / f"{name}.json.gz"
    if path.exists():
        return load_graph(path)
    import keras
    import tensorflow as tf

    from placer.importers import keras_step
    from placer.importers.keras_models import from_tf_function
    from placer.measure import attach_graphdef

    keras.utils.set_random_seed(0)
    layers = keras.layers
    kwargs = {}
    if name == "cnn":  # 2 conv layers + pooling + dense head, 32x32 RGB, batch 16
        inp = keras.Input((32, 32, 3))
        x = layers.Conv2D(16, 3, padding="same", activation="relu")(inp)
        x = layers.MaxPooling2D()(x)
        x = layers.Conv2D(32, 3, padding="same", activation="relu")(x)
        x = layers.MaxPooling2D()(x)
        x = layers.Flatten()(x)
        x = layers.Dense(64, activation="relu")(x)
        model = keras.Model(inp, layers.Dense(10)(x), name="cnn")
        batch = 16
    elif name == "lstm":  # embedding + 2 stacked unrolled LSTM(64) over 12 steps, batch 16
        inp = keras.Input((12,), dtype="int32")
        x = layers.Embedding(500, 32)(inp)
        x = layers.LSTM(64, return_sequences=True, unroll=True)(x)
        x = layers.LSTM(64, return_sequences=True, unroll=True)(x)
        model = keras.Model(inp, layers.Dense(500)(x), name="lstm")
        batch = 16

        def sparse_ce(y, p):
            return keras.losses.sparse_categorical_crossentropy(y, p, from_logits=True)

        kwargs = {"loss": sparse_ce, "target_specs": [tf.TensorSpec((batch, 12), tf.int32)]}
    elif name == "resnet":  # stem + 4 residual blocks (two 3x3 convs + BN each), 16x16x16, batch 8
        inp = keras.Input((16, 16, 3))
        x = layers.Conv2D(16, 3, padding="same")(inp)
        for _ in range(4):
            y = layers.Conv2D(16, 3, padding="same")(x)
            y = layers.BatchNormalization()(y)
            y = layers.ReLU()(y)
            y = layers.Conv2D(16, 3, padding="same")(y)
            y = layers.BatchNormalization()(y)
            x = layers.ReLU()(layers.Add()([x, y]))
        x = layers.GlobalAveragePooling2D()(x)
        model = keras.Model(inp, layers.Dense(10)(x), name="resnet_blocks")
        batch = 8
    else:
        raise PlacerError(f"unknown fidelity graph {name!r} (known: {', '.join(GRAPHS)})")
    step = keras_step(model, batch, **kwargs)
    graph = from_tf_function(step.concrete_function(), step.signature, name,
                             variable_paths=step.variable_paths, meta=step.meta,
                             prune=False)  # as the profiles in results/fidelity/ were made
    attach_graphdef(graph, step.graph_def())
    save_graph(graph, path)
    return graph


# -- the placements ----------------------------------------------------------------
def _units(graph: OpGraph) -> np.ndarray:
    """Colocation unit of each op (ops sharing a key must share a device in TensorFlow)."""
    keys: dict[str, int] = {}
    return np.array([keys.setdefault(op.colocation or f"\0{op.name}", len(keys)) for op in graph.ops])


def placements(graph: OpGraph, cluster, n_random: int, seed: int, rl_steps: int) -> list[Placement]:
    """Heuristics, single devices, contiguous splits and random placements; all honour colocation."""
    from placer.placers import registry

    units = _units(graph)
    D = len(cluster)
    out: list[Placement] = []

    def add(method: str, unit_device: np.ndarray) -> None:
        out.append(Placement.from_assignment(graph, cluster, unit_device[units], method))

    for name in registry.names(heuristic_only=True):
        try:
            p = registry.place(name, graph, cluster)
        except PlacerError as e:
            log(f"  {name}: skipped ({e})")
            continue
        out.append(p)
    for d in range(D):
        add(f"single:{d}", np.full(units.max() + 1, d))
    first_pos = np.full(units.max() + 1, len(graph))
    np.minimum.at(first_pos, units, graph.topo_rank)
    for f in (0.25, 0.5, 0.75):
        add(f"split:{f}", (first_pos >= f * len(graph)).astype(np.int64))
    add("alternate", (np.argsort(np.argsort(first_pos)) % D).astype(np.int64))
    rng = np.random.default_rng(seed)
    for k in range(n_random):
        p1 = (0.1, 0.3, 0.5)[k % 3]
        add(f"random:{k}", (rng.random(units.max() + 1) < p1).astype(np.int64))
    if rl_steps:
        try:
            from placer.rl.trainer import TrainConfig, Trainer, train

            trainer = Trainer(graph, cluster, TrainConfig(samples=8, groups=32, hidden=32, seed=seed))
            train(trainer, max_steps=rl_steps)
            p = trainer.best_placement()
            if any(len({p.devices[graph.ops[i].name] for i in np.flatnonzero(units == u)}) > 1
                   for u in range(units.max() + 1)):
                log("  rl: placement splits a colocation group; skipped")
            else:
                out.append(p)
        except Exception as e:  # the RL placer is optional here
            if interrupted(e):  # Ctrl-C, perhaps inside the compiled simulator
                raise KeyboardInterrupt from e
            log(f"  rl: skipped ({type(e).__name__}: {e})")
    return out


# -- calibration: what a crossing costs, and whether logical devices run in parallel ---
def _chain_step(size: int, length: int, chains: int, devices_of):
    """`chains` independent chains of `length` Neg ops on float32[size], placed by `devices_of(chain, k)`."""
    import tensorflow as tf

    from placer.importers.keras_models import from_tf_function
    from placer.measure.runner import PlacedStep

    def f(*xs):
        outs = []
        for x in xs:
            for _ in range(length):
                x = tf.math.negative(x)
            outs.append(x)
        return outs

    sig = [tf.TensorSpec((size,))] * chains
    cf = tf.function(f).get_concrete_function(*sig)
    g = from_tf_function(cf, sig, "chains")
    devices = {op.name: "/device:CPU:0" for op in g}
    negs = [op.name for op in g if op.op == "Neg"]
    for i, name in enumerate(negs):
        devices[name] = devices_of(i // length, i % length)
    return PlacedStep(g, cf.graph.as_graph_def(add_shapes=True), Placement("chains", "local", "x", devices), 2)


def _interleaved_medians(steps, rounds: int = 15, per_round: int = 3) -> list[float]:
    for s in steps:
        s.time(warmup=3, runs=0)
    times = [[] for _ in steps]
    for _ in range(rounds):
        for k, s in enumerate(steps):
            times[k] += s.time(0, per_round)
    for s in steps:
        s.close()
    return [float(np.median(t)) for t in times]


def calibrate() -> dict:
    """Per-crossing cost between two logical CPUs (small and 4 MiB tensors) and the speedup of
    two independent chains split over the two devices (1.0: the devices do not run in parallel)."""
    L = 200
    out = {}
    for size in (16, 1 << 20):
        one = _chain_step(size, L, 1, lambda c, k: "/device:CPU:0")
        alt = _chain_step(size, L, 1, lambda c, k: f"/device:CPU:{k % 2}")
        a, b = _interleaved_medians([one, alt])
        out[f"crossing_seconds_{size * 4}B"] = (b - a) / (L - 1)
        out[f"op_seconds_{size * 4}B"] = a / L
    size, L = 1 << 16, 60
    one = _chain_step(size, L, 2, lambda c, k: "/device:CPU:0")
    split = _chain_step(size, L, 2, lambda c, k: f"/device:CPU:{c}")
    a, b = _interleaved_medians([one, split])
    out["two_chains_one_device"], out["two_chains_two_devices"] = a, b
    out["device_parallel_speedup"] = a / b
    lat = out["crossing_seconds_64B"]
    out["fitted_latency"] = lat
    extra = out[f"crossing_seconds_{4 << 20}B"] - lat
    out["fitted_bandwidth"] = (4 << 20) / extra if extra > 0 else None  # None: no per-byte cost seen
    return out


# -- measuring -------------------------------------------------------------------
def measure_all(graph: OpGraph, places: list[Placement], rounds: int, per_round: int) -> list[list[float]]:
    """Step times of every placement, in rounds that visit every placement once each."""
    from placer.measure.runner import PlacedStep
    from placer.measure.source import graphdef_of

    graph_def = graphdef_of(graph)
    steps = [PlacedStep(graph, graph_def, p, 2) for p in places]
    try:
        for s in steps:
            s.time(warmup=2, runs=0)
        times: list[list[float]] = [[] for _ in places]
        for r in range(rounds):
            for k in np.random.default_rng(r).permutation(len(steps)):
                times[k] += steps[k].time(warmup=0, runs=per_round)
            log(f"  round {r + 1}/{rounds}")
        return times
    finally:
        for s in steps:
            s.close()


def calibrated_cluster(args):
    """This machine as `placer detect-cluster` and `placer calibrate` describe it (2 logical CPUs)."""
    from placer.measure.calibrate import TFProber, calibrate
    from placer.measure.detect import detect_cluster

    return calibrate(detect_cluster("local-calibrated", 2), TFProber(), progress=log)


def fitted(profiled: OpGraph) -> OpGraph:
    """`profiled` with the roofline fit `placer profile` stores, fitted to its costs of the ops that ran."""
    import copy

    from placer.cost_model import FIT_KEY
    from placer.measure.fit import fit_roofline
    from placer.measure.profile import LOCAL_KIND

    device = presets.get("local").devices[0]
    fit = fit_roofline(profiled, {op.name: op.cost[LOCAL_KIND] for op in profiled if op.op != "Placeholder"}, device)
    out = copy.deepcopy(profiled)
    for op in out:
        if op.op == "Placeholder":  # never traced: the fit estimates them, as `placer profile` leaves them
            op.cost.pop(LOCAL_KIND, None)
    out.meta[FIT_KEY] = {LOCAL_KIND: fit.to_dict()}
    return out


def run_graph(name: str, args, cache: Path) -> dict:
    """Profile, place, measure and simulate one graph; its graph files go to folder `cache`."""
    from placer.measure.profile import LOCAL_KIND, fit_profile, profile_ops, with_profile

    t0 = time.perf_counter()
    graph = build_graph(name, cache)
    log(f"{name}: {len(graph)} ops; profiling")
    profile = profile_ops(graph, runs=args.profile_runs, pool=True)
    profiled = with_profile(graph, profile)
    profiled.meta.pop("tf_graphdef", None)
    save_graph(profiled, cache / f"{name}.profiled.json.gz")
    # what `placer profile` writes for a cluster of logical CPUs sharing a pool: pooled costs and their fit
    device = presets.get("local").devices[0]
    calibrated = with_profile(graph, profile, LOCAL_KIND, fit_profile(graph, profile, device, pool=True), pool=True)
    calibrated.meta.pop("tf_graphdef", None)
    save_graph(calibrated, cache / f"{name}.calibrated.json.gz")
    cluster = presets.get("local")
    places = placements(profiled, cluster, args.random, args.seed, args.rl_steps)
    log(f"{name}: {len(places)} placements; measuring {args.rounds} rounds x {args.per_round} steps each")
    times = measure_all(graph, places, args.rounds, args.per_round)
    rows = []
    for p, ts in zip(places, times):
        a = p.assignment(profiled, cluster)
        rows.append({
            "method": p.method, "measured": float(np.median(ts)),
            "measured_p10": float(np.percentile(ts, 10)), "measured_p90": float(np.percentile(ts, 90)),
            "ops_on_1": int(a.sum()), "assignment": a.tolist(), "times": [float(t) for t in ts],
        })
    out = {
        "graph": name, "ops": len(graph), "placements": len(rows),
        "profile": {"overhead": profile.overhead, "scale": profile.scale, "step_seconds": profile.step_seconds,
                    "pool_ratio": profile.pool_ratio,
                    "kernel_seconds_total": profile.meta["kernel_seconds_total"]},
        "rows": rows, "seconds": time.perf_counter() - t0, "rounds": args.rounds, "per_round": args.per_round,
    }
    return simulate(out, profiled, cluster)


def simulate_configs(result: dict, cache: Path, calibrated) -> dict:
    """Simulate `result`'s measured placements with roofline costs on the preset, and with `placer profile`'s
    costs and fit on the calibrated cluster; Spearman, MAPE and worst ratio of each (and of the headline one).
    The graphs come from `cache`: `placer profile`'s is ``NAME.calibrated.json.gz`` (results older than it:
    `fitted` of ``NAME.profiled.json.gz``)."""
    name = result["graph"]
    graph, profiled = load_graph(cache / f"{name}.json.gz"), load_graph(cache / f"{name}.profiled.json.gz")
    roofline = OpGraph(graph.name, graph.ops, {})
    path = cache / f"{name}.calibrated.json.gz"
    configs = {"profiled": None, "roofline": (roofline, presets.get("local")),
               "calibrated": (load_graph(path) if path.exists() else fitted(profiled), calibrated)}
    m_ = [r["measured"] for r in result["rows"]]
    lo = [r["measured_p10"] for r in result["rows"]]
    out = {}
    for key, setup in configs.items():
        if setup is None:
            s_ = [r["simulated"] for r in result["rows"]]
        else:
            sim = Simulator(*setup)
            s_ = [sim.run(np.asarray(r["assignment"], dtype=np.int64)).step_time for r in result["rows"]]
        out[key] = {"spearman": spearman(s_, m_), "mape": mape(s_, m_), "max_ratio": max_ratio(s_, m_),
                    "spearman_p10": spearman(s_, lo), "mape_p10": mape(s_, lo), "max_ratio_p10": max_ratio(s_, lo),
                    "simulated": s_}
        log(f"{result['graph']} {key}: Spearman {out[key]['spearman']:.3f}, MAPE {100 * out[key]['mape']:.1f}%, "
            f"worst ratio {out[key]['max_ratio']:.2f} (vs p10: {out[key]['max_ratio_p10']:.2f})")
    result["configs"] = out
    return result


def simulate(result: dict, profiled: OpGraph, cluster) -> dict:
    """(Re)simulate every measured placement of `result` on `cluster`; Spearman and MAPE."""
    sim = Simulator(profiled, cluster)
    for row in result["rows"]:
        a = np.asarray(row["assignment"], dtype=np.int64)
        row["simulated"] = sim.run(a).step_time
        row["cross_edges"] = int(sum(a[i] != a[j] for i in range(len(a)) for j in
                                     sim.s_idx[sim.s_off[i]:sim.s_off[i + 1]]))
    s_, m_ = [r["simulated"] for r in result["rows"]], [r["measured"] for r in result["rows"]]
    lo = [r["measured_p10"] for r in result["rows"]]
    result.update(spearman=spearman(s_, m_), mape=mape(s_, m_), spearman_p10=spearman(s_, lo),
                  mape_p10=mape(s_, lo), cluster=cluster.to_dict(), **measurement_noise(result))
    log(f"{result['graph']}: Spearman {result['spearman']:.3f}, MAPE {100 * result['mape']:.1f}% over "
        f"{len(result['rows'])} placements")
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", default=",".join(GRAPHS), help="comma-separated: cnn, lstm, resnet")
    ap.add_argument("--rounds", type=int, default=100, help="measurement rounds over all placements")
    ap.add_argument("--per-round", type=int, default=4, help="steps timed per placement per round")
    ap.add_argument("--random", type=int, default=12, help="random placements per graph")
    ap.add_argument("--profile-runs", type=int, default=15, help="traced runs of the profile")
    ap.add_argument("--rl-steps", type=int, default=0, help="train the RL placer this many steps (0: no RL)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--force", action="store_true", help="redo graphs already in the results file")
    ap.add_argument("--resimulate", action="store_true",
                    help="only simulate the stored placements again (after a change to the simulator or the "
                         "local preset); the measurements are kept")
    ap.add_argument("--out", default=str(RESULTS / "fidelity.json"),
                    help="results file; the plot goes beside it (.png) and the graphs and profiles to the folder "
                         "of its name (default: bench/results/fidelity.json, .png, fidelity/)")
    args = ap.parse_args()
    names = args.graphs.split(",")
    unknown = [n for n in names if n not in GRAPHS]
    if unknown:
        raise PlacerError(f"--graphs: unknown {', '.join(map(repr, unknown))} (known: {', '.join(GRAPHS)})")
    check_at_least(args, "rounds", "per_round", "profile_runs")
    check_at_least(args, "random", "rl_steps", least=0)
    out_path = output_file(args.out, "--out")
    if out_path.suffix != ".json":  # its folder of graphs would be the file itself (or its plot, for X.png)
        raise PlacerError(f"--out {args.out!r} must end in .json (the plot and graphs go beside it)")
    cache = out_path.with_suffix("")  # bench/results/fidelity.json -> bench/results/fidelity/
    cache.mkdir(exist_ok=True)
    results = json.loads(out_path.read_text()) if out_path.exists() else {}
    if args.resimulate:
        for name in names:
            if name in results:
                results[name] = simulate(results[name], load_graph(cache / f"{name}.profiled.json.gz"),
                                         presets.get("local"))
        write_atomic(out_path, json.dumps(results, indent=1).encode())
    elif "calibration" not in results or args.force:
        log("calibration: crossing cost and device parallelism")
        results["calibration"] = calibrate()
        write_atomic(out_path, json.dumps(results, indent=1).encode())
    if "calibrated_cluster" not in results or args.force:
        log("calibrated cluster: placer detect-cluster + placer calibrate")
        results["calibrated_cluster"] = calibrated_cluster(args).to_dict()
        write_atomic(out_path, json.dumps(results, indent=1).encode())
    from placer.cluster import Cluster

    c = results["calibration"]
    print(f"crossing between logical CPUs: {1e6 * c['crossing_seconds_64B']:.1f} us (64 B), "
          f"{1e6 * c['crossing_seconds_4194304B']:.1f} us (4 MiB) -> latency {1e6 * c['fitted_latency']:.1f} us, "
          + (f"bandwidth {c['fitted_bandwidth'] / 1e9:.0f} GB/s" if c.get("fitted_bandwidth") and
             c["fitted_bandwidth"] < 1e13 else "no per-byte cost above the noise")
          + "; two independent chains on two devices run "
          f"{c['device_parallel_speedup']:.2f}x as fast as on one")
    for name in names:
        if args.resimulate:
            break
        if name in results and not args.force:
            log(f"{name}: already in {out_path} (use --force to redo)")
            continue
        results[name] = run_graph(name, args, cache)
        # a calibration records the machine's load of its moment: each graph keeps the one it was measured with
        results[name].update(calibration=results["calibration"], calibrated_cluster=results["calibrated_cluster"])
        write_atomic(out_path, json.dumps(results, indent=1).encode())
    for name in names:
        if name in results:
            cluster = results[name].get("calibrated_cluster", results["calibrated_cluster"])
            simulate_configs(results[name], cache, Cluster.from_dict(cluster))
    write_atomic(out_path, json.dumps(results, indent=1).encode())
    plot(results, out_path.with_suffix(".png"))
    print(f"{'graph':8} {'ops':>5} {'placements':>10} {'spearman':>9} {'MAPE':>7}   (vs measured p10: "
          "spearman, MAPE)   measured vs itself (split-half spearman of medians, of p10); "
          "spread of sim / measured / duplicates")
    for name, r in results.items():
        if name in ("calibration", "calibrated_cluster"):
            continue
        print(f"{name:8} {r['ops']:5d} {r['placements']:10d} {r['spearman']:9.3f} {100 * r['mape']:6.1f}%"
              f"   ({r['spearman_p10']:.3f}, {100 * r['mape_p10']:.1f}%)   "
              f"{r.get('split_half_spearman', float('nan')):.3f}, {r.get('split_half_spearman_p10', float('nan')):.3f}; "
              f"{100 * r.get('simulated_spread', float('nan')):.1f}% / "
              f"{100 * r.get('measured_spread', float('nan')):.1f}% / {100 * r.get('duplicate_spread', float('nan')):.1f}%")
    print(f"{'graph':8} {'costs + cluster':23} {'spearman':>9} {'MAPE':>7} {'worst ratio':>12}   (vs p10: MAPE, "
          "worst ratio)")
    for name in names:
        for key, label in (("roofline", "roofline + local"), ("profiled", "profiled + local"),
                           ("calibrated", "placer profile + calib.")):
            c = results.get(name, {}).get("configs", {}).get(key)
            if c:
                print(f"{name:8} {label:23} {c['spearman']:9.3f} {100 * c['mape']:6.1f}% {c['max_ratio']:11.2f}x   "
                      f"({100 * c['mape_p10']:.1f}%, {c['max_ratio_p10']:.2f}x)")
    return 0


if __name__ == "__main__":
    run_script(main, "bench_fidelity", "finished graphs are kept in --out: the same command again continues")
