"""`placer compare GRAPH... --cluster C... --methods all|LIST`: every method, side by side."""

from __future__ import annotations

import sys


def add_parser(sub) -> None:
    p = sub.add_parser("compare", help="run several placement methods and compare their step times",
                       description="Place every GRAPH on every CLUSTER with every method, score each placement "
                                   "with the simulator, and print one row each: graph, cluster, method, "
                                   "step_time, lower_bound, oom, place_seconds. Exits 1 if any method failed "
                                   "(its row says why).")
    p.add_argument("graphs", nargs="+", metavar="GRAPH", help="graph files (.json or .json.gz)")
    p.add_argument("--cluster", nargs="+", required=True, metavar="NAME",
                   help="preset names or cluster JSON files")
    p.add_argument("--methods", default="all",
                   help="'all' (every heuristic) or a comma-separated list of methods (default: all)")
    p.add_argument("--objective", choices=("step_time", "throughput"), default="step_time",
                   help="step_time (default) or throughput: rows gain max_load (the pipelined max device "
                        "load) and the winner is the smallest max_load")
    p.add_argument("--json", action="store_true", help="print the rows as a JSON list")
    p.add_argument("--plot", metavar="PNG", help="also draw a bar chart of step time / lower bound to this file")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(run=run)


def run(args) -> int:
    from placer.cli.common import human_seconds, print_json, print_table
    from placer.cluster import load_cluster
    from placer.graph_io import load_graph
    from placer.placers import registry
    from placer.placers.comparison import ROW_FIELDS, compare, winners

    methods = registry.resolve(args.methods)
    clusters = [load_cluster(c) for c in args.cluster]
    graphs = [load_graph(g) for g in args.graphs]

    def progress(done: int, total: int, row: dict) -> None:
        if args.quiet:
            return
        what = ("error: " + row["error"]) if "error" in row else (
            f"{human_seconds(row['step_time'])}{' OOM' if row['oom'] else ''}, placed in {row['place_seconds']:.2f} s")
        print(f"[{done}/{total}] {row['graph']} on {row['cluster']} by {row['method']}: {what}",
              file=sys.stderr, flush=True)

    rows = compare(graphs, clusters, methods, progress=progress, objective=args.objective)
    key = "max_load" if args.objective == "throughput" else "step_time"
    if args.plot:
        from placer.plots import compare_chart

        compare_chart(rows, args.plot)
    failed = [r for r in rows if "error" in r]
    if args.json:
        print_json(rows)
    else:
        best = winners(rows, key)
        table = []
        for r in rows:
            mark = "*" if best.get((r["graph"], r["cluster"])) == r["method"] else ""
            table.append((r["graph"], r["cluster"], r["method"] + mark,
                          human_seconds(r["step_time"]), human_seconds(r["lower_bound"]),
                          "-" if r["oom"] is None else ("yes" if r["oom"] else "no"),
                          "-" if r["place_seconds"] is None else f"{r['place_seconds']:.3f}",
                          r.get("error", ""))
                         + ((("-" if r.get("max_load") is None else f"{r['max_load']:.6g}")
                             + (" (ignored)" if r.get("ignored_objective") else ""),) if key == "max_load" else ()))
        print_table(list(ROW_FIELDS) + ["error"] + (["max_load"] if key == "max_load" else []), table)
        print("* fastest placement that fits, per graph and cluster"
              + (" (smallest max_load; '(ignored)': the method does not optimise throughput)"
                 if key == "max_load" else ""))
        if args.plot:
            print(f"wrote {args.plot}")
    if failed:
        print(f"placer compare: {len(failed)} of {len(rows)} runs failed: "
              + "; ".join(f"{r['method']} on {r['graph']}/{r['cluster']}" for r in failed[:5]),
              file=sys.stderr)
        return 1
    return 0
