"""Benchmark: heuristic placers' speed, and who wins on the benchmark graphs.

Prints measured figures and writes them under bench/results/:

1. Speed: each heuristic placer on a 10,000-op synthetic training-like graph
   (`placer.synthetic.layered_graph(10000)`) on each cluster; wall seconds of
   the placer alone (target: at most 30 s each), and its simulated step time.
   -> placers_speed.json, placers_speed.md
2. Compare: every heuristic on every graph in graphs/ on 2gpu, 4gpu and
   8gpu, scored by the simulator, with the winner of each (graph, cluster).
   -> placers_compare.json, placers_compare.md, placers_compare.png

Long runs print progress on stderr. The compare rows are saved after each
run, and `--resume` skips the rows already in placers_compare.json, so an
interrupted run picks up where it stopped.

Run: .venv/bin/python bench/bench_placers.py [--ops 10000] [--clusters 2gpu 4gpu 8gpu]
                                            [--graphs graphs] [--skip-speed] [--skip-compare] [--resume]
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
from placer.graph_io import load_graph, write_atomic  # noqa: E402
from placer.placers import registry  # noqa: E402
from placer.placers.comparison import compare, winners  # noqa: E402
from placer.synthetic import layered_graph  # noqa: E402

RESULTS = Path(__file__).parent / "results"
TARGET_SECONDS = 30.0


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def ms(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x * 1e3:.2f}"


def save(name: str, rows, markdown: str) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(rows, indent=1))
    (RESULTS / f"{name}.md").write_text(markdown)


def speed(num_ops: int, clusters: list[str], methods: list[str]) -> list[dict]:
    """Seconds each placer takes on a `num_ops` graph, per cluster."""
    graph = layered_graph(num_ops)
    log(f"speed: {graph!r}")
    rows = []
    for cname in clusters:
        cluster = presets.get(cname)
        for method in methods:
            p = registry.place(method, graph, cluster)
            row = {"method": method, "cluster": cname, "ops": num_ops, "place_seconds": p.meta["place_seconds"],
                   "step_time": p.step_time, "lower_bound": p.lower_bound, "oom": p.oom}
            rows.append(row)
            log(f"  {cname} {method:12s} placed in {row['place_seconds']:7.3f} s, step {ms(p.step_time)} ms"
                + ("  OVER TARGET" if row["place_seconds"] > TARGET_SECONDS else ""))
    lines = [f"# Placer speed on layered_graph({num_ops}) ({graph.num_edges} edges)", "",
             f"Wall seconds of the placer alone (target <= {TARGET_SECONDS:.0f} s); step time simulated.", "",
             "| method | " + " | ".join(f"{c} s" for c in clusters) + " | " +
             " | ".join(f"{c} step ms" for c in clusters) + " |",
             "|---|" + "---|" * (2 * len(clusters))]
    for method in methods:
        mine = {r["cluster"]: r for r in rows if r["method"] == method}
        lines.append(f"| {method} | " + " | ".join(f"{mine[c]['place_seconds']:.3f}" for c in clusters) + " | "
                     + " | ".join(ms(mine[c]["step_time"]) for c in clusters) + " |")
    save("placers_speed", rows, "\n".join(lines) + "\n")
    return rows


def comparison(graph_dir: Path, clusters: list[str], methods: list[str], resume: bool) -> list[dict]:
    """Every method on every graph in `graph_dir` and every cluster; saved row by row."""
    paths = sorted(graph_dir.glob("*.json.gz")) + sorted(graph_dir.glob("*.json"))
    if not paths:
        log(f"compare: no graphs in {graph_dir}/; skipped")
        return []
    out = RESULTS / "placers_compare.json"
    rows: list[dict] = json.loads(out.read_text()) if resume and out.exists() else []
    done = {(r["graph"], r["cluster"], r["method"]) for r in rows if "error" not in r}
    rows = [r for r in rows if "error" not in r]
    cluster_objs = [presets.get(c) for c in clusters]
    total = len(paths) * len(clusters) * len(methods)
    for path in paths:
        graph = load_graph(path)
        for cluster in cluster_objs:
            todo = [m for m in methods if (graph.name, cluster.name, m) not in done]
            for method in todo:
                row = compare([graph], [cluster], [method])[0]
                rows.append(row)
                write_atomic(out, json.dumps(rows, indent=1).encode())  # a kill mid-save keeps the old rows
                what = row.get("error") or (f"{ms(row['step_time'])} ms{' OOM' if row['oom'] else ''}, "
                                           f"placed in {row['place_seconds']:.2f} s")
                log(f"[{len(rows)}/{total}] {graph.name} {cluster.name} {method}: {what}")
    write_compare_report(rows, clusters, methods)
    return rows


def write_compare_report(rows: list[dict], clusters: list[str], methods: list[str]) -> None:
    """Markdown pivot (step time in ms per method), the winner per row, and the bar chart."""
    from placer.plots import compare_chart

    best = winners(rows)
    graphs = list(dict.fromkeys(r["graph"] for r in rows))
    by_key = {(r["graph"], r["cluster"], r["method"]): r for r in rows}
    lines = ["# Heuristic placers on the benchmark graphs", "",
             "Simulated step time in ms (lower is better); `OOM` = over a device's memory; "
             "`lb` = the simulator's lower bound; **bold** = the winner (fastest that fits).", "",
             "| graph | cluster | lb | " + " | ".join(methods) + " | winner | vs single |",
             "|---|---|---|" + "---|" * len(methods) + "---|---|"]
    wins: dict[str, int] = {}
    for g in graphs:
        for c in clusters:
            cells, lb = [], None
            for m in methods:
                r = by_key.get((g, c, m))
                if r is None:
                    cells.append("")
                    continue
                lb = r.get("lower_bound") or lb
                text = "error" if "error" in r else ms(r["step_time"]) + (" OOM" if r["oom"] else "")
                cells.append(f"**{text}**" if best.get((g, c)) == m else text)
            win = best.get((g, c), "-")
            wins[win] = wins.get(win, 0) + 1
            single = by_key.get((g, c, "single"))
            winner_row = by_key.get((g, c, win))
            gain = (f"{single['step_time'] / winner_row['step_time']:.2f}x"
                    if single and winner_row and single.get("step_time") and winner_row.get("step_time") else "-")
            lines.append(f"| {g} | {c} | {ms(lb)} | " + " | ".join(cells) + f" | {win} | {gain} |")
    lines += ["", "Wins: " + ", ".join(f"{m} {n}" for m, n in sorted(wins.items(), key=lambda kv: -kv[1])), ""]
    (RESULTS / "placers_compare.md").write_text("\n".join(lines))
    compare_chart(rows, RESULTS / "placers_compare.png", "Heuristic placers: step time / lower bound")
    print("\n".join(lines))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", type=int, default=10000, help="ops of the synthetic speed graph")
    parser.add_argument("--clusters", nargs="+", default=["2gpu", "4gpu", "8gpu"])
    parser.add_argument("--graphs", type=Path, default=Path(__file__).parent.parent / "graphs")
    parser.add_argument("--methods", default="all", help="'all' heuristics or a comma list")
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--skip-compare", action="store_true")
    parser.add_argument("--resume", action="store_true", help="keep compare rows already saved")
    args = parser.parse_args()
    methods = registry.resolve(args.methods)
    t0 = time.perf_counter()
    if not args.skip_speed:
        rows = speed(args.ops, args.clusters, methods)
        slowest = max(rows, key=lambda r: r["place_seconds"])
        print(f"speed: slowest placer on {args.ops} ops: {slowest['method']} on {slowest['cluster']}, "
              f"{slowest['place_seconds']:.2f} s (target {TARGET_SECONDS:.0f} s)")
        print((RESULTS / "placers_speed.md").read_text())
    if not args.skip_compare:
        comparison(args.graphs, args.clusters, methods, args.resume)
    log(f"done in {time.perf_counter() - t0:.0f} s; results in {RESULTS}/")
    return 0


if __name__ == "__main__":
    run_script(main, "bench_placers", "run it again with --resume to keep the compare rows saved so far")
