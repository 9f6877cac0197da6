"""Benchmark: the heuristics on topology clusters, with and without seeing routed, shared transfers.

Every heuristic's simulated step time and wall seconds on each graph of
graphs/ on ``4gpu-topology`` (`placer.machines.v100_pcie_server(4)`: V100 PCIe
cards two to a switch, dual socket) and ``dgx-a100``, as one JSON file. Run it
once on the code before a change and once after (``PYTHONPATH`` selects the
checkout), then ``--table BEFORE AFTER`` prints the comparison as Markdown.
``pipeline_dp`` runs without its timed local search, so its answer does not
depend on the machine's load (as in tests/golden).

Run: .venv/bin/python -m bench.bench_routes --out after.json [--graphs rnnlm nmt]
     .venv/bin/python -m bench.bench_routes --table before.json after.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLUSTERS = {"4gpu-topology": ("v100_pcie_server", (4,)), "dgx-a100": ("dgx_a100", ())}
OPTIONS = {"pipeline_dp": {"local_search": False}}


def run(graphs: list[str] | None) -> list[dict]:
    """One row per (graph, cluster, method): step time, oom, seconds to place."""
    from placer import machines
    from placer.graph_io import load_graph
    from placer.placers import registry

    rows = []
    for path in sorted((ROOT / "graphs").glob("*.json.gz")):
        name = path.name.removesuffix(".json.gz")
        if graphs and name not in graphs:
            continue
        graph = load_graph(path)
        for label, (builder, args) in CLUSTERS.items():
            cluster = getattr(machines, builder)(*args)
            for method in registry.names(heuristic_only=True):
                t0 = time.perf_counter()
                p = registry.place(method, graph, cluster, **OPTIONS.get(method, {}))
                seconds = time.perf_counter() - t0
                rows.append({"graph": name, "ops": len(graph), "cluster": label, "method": method,
                             "step_time": p.step_time, "oom": p.oom, "seconds": seconds})
                print(f"  {name}/{label}/{method}: {p.step_time * 1e3:.2f} ms, {seconds:.2f} s", file=sys.stderr)
    return rows


def table(before: list[dict], after: list[dict]) -> str:
    """Markdown: step time before -> after per (graph, cluster, method), and each cluster's geometric mean."""
    import math

    old = {(r["graph"], r["cluster"], r["method"]): r for r in before}
    lines = ["| graph | cluster | method | before ms | after ms | after/before | place s before -> after |",
             "|---|---|---|---:|---:|---:|---|"]
    ratios: dict[str, list[float]] = {}
    for r in after:
        b = old.get((r["graph"], r["cluster"], r["method"]))
        if b is None:
            continue
        ratio = r["step_time"] / b["step_time"]
        ratios.setdefault(f"{r['cluster']}/{r['method']}", []).append(ratio)
        oom = lambda x: " (oom)" if x["oom"] else ""  # noqa: E731
        lines.append(f"| {r['graph']} | {r['cluster']} | {r['method']} | {b['step_time'] * 1e3:.2f}{oom(b)} | "
                     f"{r['step_time'] * 1e3:.2f}{oom(r)} | {ratio:.3f} | {b['seconds']:.2f} -> {r['seconds']:.2f} |")
    lines += ["", "| cluster/method | geometric mean after/before | best | worst |", "|---|---:|---:|---:|"]
    for key, rs in sorted(ratios.items()):
        g = math.exp(sum(math.log(x) for x in rs) / len(rs))
        lines.append(f"| {key} | {g:.3f} | {min(rs):.3f} | {max(rs):.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, help="write the rows here (JSON)")
    ap.add_argument("--graphs", nargs="*", help="graph names (file stems); all of graphs/ by default")
    ap.add_argument("--table", nargs=2, type=Path, metavar=("BEFORE", "AFTER"), help="compare two runs")
    args = ap.parse_args(argv)
    if args.table:
        before, after = (json.loads(p.read_text())["rows"] for p in args.table)
        print(table(before, after))
        return 0
    rows = run(args.graphs)
    if args.out:
        args.out.write_text(json.dumps({"benchmark": "routes", "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
