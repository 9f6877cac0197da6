"""Benchmark: our placers on public profiled graphs, next to the published optima.

For every MSR dnn-partitioning workload (throughput inputs: layer and operator
graphs, inference and training, on the cluster each defines) and every
PipeDream profile (on the ``4gpu`` preset: host CPU + 4 V100 over PCIe):

- the published splits (human experts, the authors' DP) converted with
  `placer.importers.msr.load_split` and scored by our throughput objective
  (``max_load``) and simulator (``step_time``);
- every heuristic placer and ``pipeline_dp``, run with ``objective="throughput"``
  (placers that do not optimise it place as they always do): the max load and
  step time of the placement, and the seconds the placer took.

Rows are saved as they come to ``bench/results/datasets.json``; a rerun skips
rows already there (``--fresh`` starts over), so an interrupted run resumes.
The tables are printed and written to ``bench/results/datasets.md``.

The learned placer (REINFORCE on the throughput objective, warm-started from
the best placer by max load) runs with ``--rl-seconds S`` on the workloads
matching ``--rl-on`` (default: the MSR ones).

Run: .venv/bin/python -m bench.bench_datasets [--methods all,pipeline_dp] [--only SUBSTRING] [--fresh]
     [--rl-seconds 30 [--rl-on msr/]]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from placer import presets  # noqa: E402
from placer.cli.common import run_script  # noqa: E402
from placer.errors import PlacerError, interrupted  # noqa: E402
from placer.importers import msr, pipedream  # noqa: E402
from placer.objectives import ThroughputModel  # noqa: E402
from placer.placers import registry  # noqa: E402
from placer.simulator import Simulator  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ROOT / ".." / "shared" / "datasets"
MSR = DATASETS / "msr_dnn_partitioning"
PIPEDREAM = DATASETS / "pipedream_profiles"
RESULTS = ROOT / "bench" / "results"
PIPEDREAM_CLUSTER = "4gpu"
# The experts' split files carry no maxLoad; the dataset README (from the paper) gives these.
README_EXPERT_MAX_LOAD = {"msr/layer/resnet50_inference": 43.9183, "msr/layer/gnmt_inference": 46.2085,
                          "msr/layer/bert24_inference": 20.084}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def workloads() -> list[dict]:
    """Every workload: how to load it, its cluster, and its published splits."""
    out = []
    for path in sorted((MSR / "throughput-inputs").glob("*/*.json")):
        kind, stem = path.parent.name, path.stem
        splits = {}
        dp = MSR / "reproduced_outputs" / f"{kind}__{stem}.dp.json"
        if dp.exists():
            splits["published DP"] = dp
        expert = MSR / "human-experts" / f"{stem}_expert.json"
        if kind == "LayerGraphs" and expert.exists():
            splits["published expert"] = expert
        out.append({"id": f"msr/{'layer' if kind == 'LayerGraphs' else 'operator'}/{stem}", "path": path,
                    "format": "msr", "splits": splits})
    for path in sorted(PIPEDREAM.glob("*/*/graph.txt")):
        out.append({"id": f"pipedream/{path.parent.name}", "path": path, "format": "pipedream", "splits": {}})
    return out


def load(w: dict):
    if w["format"] == "msr":
        return msr.load(w["path"]), msr.load_cluster(w["path"])
    return pipedream.load(w["path"]), presets.get(PIPEDREAM_CLUSTER)


def score(graph, cluster, placement) -> dict:
    model = ThroughputModel(graph, cluster)
    a = placement.assignment(graph, cluster)
    loads = model.loads(a)
    res = Simulator(graph, cluster).run(a)
    return {"max_load": loads.max_load, "step_time": res.step_time, "fits": loads.memory_ok,
            "colocation_ok": loads.colocation_ok, "oom": res.oom}


def run_rl(graph, cluster, seconds: float) -> tuple[object, float]:
    """The learned placer on the throughput objective (`placer train --objective throughput`)."""
    from placer.rl.trainer import TrainConfig, Trainer, train

    t0 = time.perf_counter()
    trainer = Trainer(graph, cluster, TrainConfig(objective="throughput"))
    train(trainer, budget_seconds=seconds)
    return trainer.best_placement(), time.perf_counter() - t0


def run_workload(w: dict, methods: list[str], done: dict, save, rl_seconds: float = 0.0) -> None:
    graph, cluster = load(w)
    log(f"{w['id']}: {len(graph)} ops on {cluster.name} ({len(cluster)} devices)")
    key = f"{w['id']}|lower bound"
    if key not in done:
        save(key, {"workload": w["id"], "method": "lower bound", "max_load": ThroughputModel(graph, cluster).lower_bound()})
    for label, split in w["splits"].items():
        key = f"{w['id']}|{label}"
        if key in done:
            continue
        p = msr.load_split(w["path"], split)
        row = {"workload": w["id"], "method": label, "ops": len(graph), "cluster": cluster.name,
               "published_max_load": p.meta.get("published_max_load"), "seconds": None, **score(graph, cluster, p)}
        save(key, row)
    for method in methods:
        key = f"{w['id']}|{method}"
        if key in done:
            continue
        t0 = time.perf_counter()
        try:
            p = registry.place(method, graph, cluster, objective="throughput")
        except Exception as e:  # one failing placer must not sink the table
            if interrupted(e):  # Ctrl-C inside the compiled simulator
                raise KeyboardInterrupt from e
            row = {"workload": w["id"], "method": method, "error": f"{type(e).__name__}: {e}"}
        else:
            row = {"workload": w["id"], "method": method, "ops": len(graph), "cluster": cluster.name,
                   "seconds": p.meta["place_seconds"], "ignored_objective": "ignored_objective" in p.meta,
                   **score(graph, cluster, p)}
            if method == "pipeline_dp":
                info = p.meta["pipeline_dp"]
                row["dp_max_load"] = info["dp_max_load"]
                row["dp_search"] = info["search"]
        log(f"  {method}: " + (row.get("error") or
                               f"max_load {row['max_load']:.6g}, step {row['step_time']:.6g}, "
                               f"{time.perf_counter() - t0:.2f} s"))
        save(key, row)
    key = f"{w['id']}|rl"
    if rl_seconds > 0 and key not in done:
        p, seconds = run_rl(graph, cluster, rl_seconds)
        row = {"workload": w["id"], "method": "rl", "ops": len(graph), "cluster": cluster.name, "seconds": seconds,
               "ignored_objective": False, "found_at_step": p.meta["found_at_step"],
               "warm_start": p.meta["warm_start"].get("heuristic"), **score(graph, cluster, p)}
        log(f"  rl: max_load {row['max_load']:.6g} (warm start {row['warm_start']}, best found at step "
            f"{row['found_at_step']}), {seconds:.1f} s")
        save(key, row)


def fmt(x, digits: int = 6) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return f"{x:.{digits}g}"


def _rl_cell(row: dict | None) -> str:
    """The learned placer's max load, and whether it beat its warm start."""
    if row is None:
        return "-"
    found = "warm start kept" if row["found_at_step"] == 0 else f"found at step {row['found_at_step']}"
    return f"{fmt(row['max_load'])} ({found}, {row['seconds']:.0f} s)"


def tables(rows: dict, methods: list[str]) -> str:
    by_workload: dict[str, dict[str, dict]] = {}
    for row in rows.values():
        by_workload.setdefault(row["workload"], {})[row["method"]] = row
    lines = ["## Max load (throughput objective; smaller is better)", "",
             "MSR times are the dataset's (ms); PipeDream max loads are in seconds. "
             "`DP only` is pipeline_dp before its local search; `vs DP` compares our best with the published DP; "
             "`lower bound`: `ThroughputModel.lower_bound` (heaviest colocation group, or all compute spread "
             "evenly; no placement can do better).", "",
             "| workload | ops | lower bound | published expert | published DP | DP only | pipeline_dp | vs DP | "
             "best other heuristic | pipeline_dp s | rl |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    heuristics = [m for m in methods if m not in ("pipeline_dp", "rl")]
    for wid, r in by_workload.items():
        dp = r.get("pipeline_dp", {})
        pub = r.get("published DP", {}).get("max_load")
        ours = dp.get("max_load")
        vs = f"{(ours / pub - 1) * 100:+.2f}%" if pub and ours is not None else "-"
        cands = [(r[m]["max_load"], m) for m in heuristics if m in r and "max_load" in r[m] and r[m]["fits"]]
        best = min(cands) if cands else None
        lines.append(f"| {wid} | {next((x['ops'] for x in r.values() if 'ops' in x), '-')} | "
                     f"{fmt(r.get('lower bound', {}).get('max_load'))} | {fmt(r.get('published expert', {}).get('max_load'))} | {fmt(pub)} | {fmt(dp.get('dp_max_load'))} | "
                     f"{fmt(ours)} | {vs} | {fmt(best[0]) + ' (' + best[1] + ')' if best else '-'} | "
                     f"{fmt(dp.get('seconds'), 3)} | {_rl_cell(r.get('rl'))} |")
    lines += ["", "## Reproduction: the authors' splits scored by `placer`", "",
              "| workload | split | published maxLoad (experts: the README's 4-5 digits) | our max_load | relative difference |", "|---|---|---|---|---|"]
    for wid, r in by_workload.items():
        for label in ("published expert", "published DP"):
            x = r.get(label)
            if x is None:
                continue
            pub = x.get("published_max_load")
            if pub is None and label == "published expert":
                pub = README_EXPERT_MAX_LOAD.get(wid)
            diff = f"{abs(x['max_load'] - pub) / pub:.1e}" if pub else "(not published)"
            lines.append(f"| {wid} | {label} | {fmt(pub, 12)} | {fmt(x['max_load'], 12)} | {diff} |")
    lines += ["", "## Every placer: max load / step time / placer seconds", "",
              "A placement over memory (throughput model: weights) is marked `!`.", "",
              "| workload | " + " | ".join(["published expert", "published DP"] + methods) + " |",
              "|---|" + "---|" * (len(methods) + 2)]
    for wid, r in by_workload.items():
        cells = []
        for m in ["published expert", "published DP"] + methods:
            x = r.get(m)
            if x is None:
                cells.append("")
            elif "error" in x:
                cells.append("error")
            else:
                cells.append(f"{fmt(x['max_load'], 4)}{'' if x['fits'] else '!'} / {fmt(x['step_time'], 4)}"
                             + (f" / {x['seconds']:.2f}s" if x.get("seconds") is not None else ""))
        lines.append(f"| {wid} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", default="all,pipeline_dp", help="placers (default: every heuristic + pipeline_dp)")
    parser.add_argument("--only", help="run only workloads whose id contains this")
    parser.add_argument("--fresh", action="store_true", help="ignore saved rows")
    parser.add_argument("--rl-seconds", type=float, default=0.0,
                        help="also train the learned placer on the throughput objective for this long (default 0: no)")
    parser.add_argument("--rl-on", default="msr/", help="workloads (id substring) the learned placer runs on")
    args = parser.parse_args()
    if not MSR.is_dir():
        log(f"datasets not found at {DATASETS} (expected ../shared/datasets beside the clone)")
        return 1
    methods = registry.resolve(args.methods)
    if not args.rl_seconds >= 0:
        raise PlacerError(f"--rl-seconds must be 0 or more, got {args.rl_seconds:g}")
    chosen = [w for w in workloads() if not args.only or args.only in w["id"]]
    if not chosen:
        raise PlacerError(f"--only {args.only!r}: no workload id contains it (ids look like msr/layer/gnmt_training, "
                          "pipedream/vgg16)")
    RESULTS.mkdir(parents=True, exist_ok=True)
    store = RESULTS / "datasets.json"
    rows: dict = {} if args.fresh or not store.exists() else json.loads(store.read_text())

    def save(key: str, row: dict) -> None:
        rows[key] = row
        tmp = store.with_suffix(".tmp")
        tmp.write_text(json.dumps(rows, indent=1))
        tmp.replace(store)

    for w in chosen:
        run_workload(w, methods, rows, save, args.rl_seconds if args.rl_on in w["id"] else 0.0)
    # the tables show every saved row, not only this run's methods (a run of a few rewrote them without the rest)
    saved = {r.get("method") for r in rows.values()} | set(methods)
    known = registry.resolve("all,pipeline_dp") + ["rl"]
    methods = [m for m in known if m in saved] + [m for m in methods if m not in known]
    text = tables(rows, methods)
    (RESULTS / "datasets.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    run_script(main, "bench_datasets", "finished rows are kept: the same command again continues (--fresh starts over)")
