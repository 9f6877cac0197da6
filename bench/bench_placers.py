"""Benchmark: heuristic placers' speed, and who wins on the benchmark graphs.

Prints measured figures and writes them to the folder ``--out`` names
(bench/results/, whose files README quotes, for the full run):

1. Speed: each heuristic placer on a 10,000-op synthetic training-like graph
   (`placer.synthetic.layered_graph(10000)`) on each cluster; wall seconds of
   the placer alone (target: at most 30 s each), and its simulated step time.
   -> placers_speed.json, placers_speed.md
2. Compare: every heuristic on every graph in graphs/ on 2gpu, 4gpu and
   8gpu, scored by the simulator, with the winner of each (graph, cluster).
   -> placers_compare.json, placers_compare.md, placers_compare.png

A partial run (``--ops`` other than 10000, ``--clusters`` other than all
three, ``--methods`` other than all, ``--graphs`` other than graphs/) writes
to bench/results/partial/ unless ``--out`` says where, so that a small check
never replaces the full run's files; ``--out bench/results`` does.

Long runs print progress on stderr. The compare rows are saved after each
run, and `--resume` skips the rows already in OUT/placers_compare.json, so an
interrupted run picks up where it stopped. A saved row is kept only for the
same graph file and cluster (their fingerprints): those of a graph file
rewritten, or a preset changed, under the same name are placed again, with
one line saying so (rows saved before fingerprints were recorded are kept).

Run: .venv/bin/python -m bench.bench_placers [--ops 10000] [--clusters 2gpu 4gpu 8gpu]
                                            [--graphs graphs] [--skip-speed] [--skip-compare] [--resume]
                                            [--out bench/results]
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
from placer.cli.common import check_at_least, run_folder, run_script  # noqa: E402
from placer.fileio import write_atomic  # noqa: E402
from placer.graph_io import load_graph  # noqa: E402
from placer.placers import registry  # noqa: E402
from placer.placers.comparison import compare, winners  # noqa: E402
from placer.synthetic import layered_graph  # noqa: E402

RESULTS = Path(__file__).parent / "results"
GRAPHS = Path(__file__).parent.parent / "graphs"
TARGET_SECONDS = 30.0
FULL_OPS = 10000
FULL_CLUSTERS = ["2gpu", "4gpu", "8gpu"]
"""The full run's settings, whose results README quotes."""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def ms(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x * 1e3:.2f}"


def save(out: Path, name: str, rows, markdown: str) -> None:
    (out / f"{name}.json").write_text(json.dumps(rows, indent=1))
    (out / f"{name}.md").write_text(markdown)


def speed(num_ops: int, clusters: list[str], methods: list[str], out: Path) -> list[dict]:
    """Seconds each placer takes on a `num_ops` graph, per cluster; saved in `out`."""
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
    save(out, "placers_speed", rows, "\n".join(lines) + "\n")
    return rows


def stale(row: dict, graph, cluster) -> str | None:
    """Why saved `row` is not an answer for `graph` on `cluster` (of the same names), or None when it is (a row
    saved before fingerprints were recorded is taken as it is)."""
    if row.get("graph_fingerprint", graph.fingerprint) != graph.fingerprint:
        return "from another graph file"
    if row.get("cluster_fingerprint", cluster.fingerprint) != cluster.fingerprint:
        return f"on another {cluster.name} cluster"
    return None


def comparison(graph_dir: Path, clusters: list[str], methods: list[str], resume: bool, out: Path) -> list[dict]:
    """Every method on every graph in `graph_dir` and every cluster; saved row by row in `out`.

    With `resume`, the rows saved in `out` for the same graph file and cluster are kept; those of a graph
    file or cluster changed under the same name are placed again, with one line saying so."""
    paths = sorted(graph_dir.glob("*.json.gz")) + sorted(graph_dir.glob("*.json"))
    if not paths:
        log(f"compare: no graphs in {graph_dir}/; skipped")
        return []
    saved = out / "placers_compare.json"
    rows: list[dict] = json.loads(saved.read_text()) if resume and saved.exists() else []
    rows = [r for r in rows if "error" not in r]
    cluster_objs = [presets.get(c) for c in clusters]
    total = len(paths) * len(clusters) * len(methods)
    for path in paths:
        graph = load_graph(path)
        for cluster in cluster_objs:
            old = [r for r in rows if (r["graph"], r["cluster"]) == (graph.name, cluster.name)
                   and stale(r, graph, cluster)]
            if old:
                log(f"{graph.name} on {cluster.name}: its saved rows were made {stale(old[0], graph, cluster)} "
                    f"of that name, not {path}'s; placing them again")
                rows = [r for r in rows if all(r is not o for o in old)]
            done = {r["method"] for r in rows if (r["graph"], r["cluster"]) == (graph.name, cluster.name)}
            for method in [m for m in methods if m not in done]:
                row = compare([graph], [cluster], [method])[0]
                rows.append(row)
                write_atomic(saved, json.dumps(rows, indent=1).encode())  # a kill mid-save keeps the old rows
                what = row.get("error") or (f"{ms(row['step_time'])} ms{' OOM' if row['oom'] else ''}, "
                                           f"placed in {row['place_seconds']:.2f} s")
                log(f"[{len(rows)}/{total}] {graph.name} {cluster.name} {method}: {what}")
    write_compare_report(rows, *columns(rows), out)
    return rows


def columns(rows: list[dict]) -> tuple[list[str], list[str]]:
    """The clusters and methods of `rows`, in the full table's order: the table of a run of a few methods or
    clusters, resumed, shows every saved row, not this run's columns alone."""
    every = registry.resolve("all")
    clusters = ([c for c in FULL_CLUSTERS if any(r["cluster"] == c for r in rows)]
                + sorted({r["cluster"] for r in rows} - set(FULL_CLUSTERS)))
    methods = ([m for m in every if any(r["method"] == m for r in rows)]
               + sorted({r["method"] for r in rows} - set(every)))
    return clusters, methods


def write_compare_report(rows: list[dict], clusters: list[str], methods: list[str], out: Path) -> None:
    """Markdown pivot (step time in ms per method), the winner per row, and the bar chart, in `out`."""
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
    (out / "placers_compare.md").write_text("\n".join(lines))
    compare_chart(rows, out / "placers_compare.png", "Heuristic placers: step time / lower bound")
    print("\n".join(lines))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", type=int, default=FULL_OPS, help="ops of the synthetic speed graph")
    parser.add_argument("--clusters", nargs="+", default=FULL_CLUSTERS)
    parser.add_argument("--graphs", type=Path, default=GRAPHS)
    parser.add_argument("--methods", default="all", help="'all' heuristics or a comma list")
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--skip-compare", action="store_true")
    parser.add_argument("--resume", action="store_true", help="keep compare rows already saved in OUT")
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for the results (made if missing, in a folder that exists; default: bench/results/, README's, for the "
                             "full run, bench/results/partial/ for a partial one)")
    return parser.parse_args(argv)


def check_args(args: argparse.Namespace) -> list[str]:
    """This run's methods; a PlacerError for settings no run can have, before any work."""
    check_at_least(args, "ops")
    for cname in args.clusters:
        presets.get(cname)
    if args.out is not None:
        run_folder(str(args.out))
    return registry.resolve(args.methods)


def partial_options(args: argparse.Namespace, methods: list[str]) -> list[str]:
    """The options that make this run other than the full one whose results README quotes ([] for it)."""
    out = []
    if not args.skip_speed and args.ops != FULL_OPS:
        out.append(f"--ops {args.ops}")
    if args.clusters != FULL_CLUSTERS:
        out.append("--clusters " + " ".join(args.clusters))
    if methods != registry.resolve("all"):
        out.append(f"--methods {args.methods}")
    if not args.skip_compare and args.graphs.resolve() != GRAPHS.resolve():
        out.append(f"--graphs {args.graphs}")
    return out


def out_folder(args: argparse.Namespace, methods: list[str]) -> Path:
    """Where this run writes: ``--out``, else bench/results/ for the full run and bench/results/partial/ for a
    partial one (it would replace the figures README quotes with a small check's)."""
    if args.out is not None:
        return args.out
    partial = partial_options(args, methods)
    if partial:
        log(f"a partial run ({', '.join(partial)}): results in {RESULTS / 'partial'}/, not README's "
            f"(--out {RESULTS} to replace those)")
        return RESULTS / "partial"
    return RESULTS


def main() -> int:
    args = parse_args()
    methods = check_args(args)
    out = out_folder(args, methods)
    out.mkdir(exist_ok=True)  # only the last folder: a mistyped parent is an error, not a new tree
    t0 = time.perf_counter()
    if not args.skip_speed:
        rows = speed(args.ops, args.clusters, methods, out)
        slowest = max(rows, key=lambda r: r["place_seconds"])
        print(f"speed: slowest placer on {args.ops} ops: {slowest['method']} on {slowest['cluster']}, "
              f"{slowest['place_seconds']:.2f} s (target {TARGET_SECONDS:.0f} s)")
        print((out / "placers_speed.md").read_text())
    if not args.skip_compare:
        comparison(args.graphs, args.clusters, methods, args.resume, out)
    log(f"done in {time.perf_counter() - t0:.0f} s; results in {out}/")
    return 0


if __name__ == "__main__":
    run_script(main, "bench_placers", "run it again with --resume to keep the compare rows saved so far")
