"""`placer validate GRAPH`: check a graph file and summarise it."""

from __future__ import annotations

from placer.cli.common import GRAPH_FILE_HELP, add_json_flag


def add_parser(sub) -> None:
    p = sub.add_parser("validate", help="check a graph file and print a summary",
                       description="Check a graph file (JSON or .json.gz) and print its size.")
    p.add_argument("graph", help=GRAPH_FILE_HELP)
    add_json_flag(p, "the summary")
    p.set_defaults(run=run)


def run(args) -> int:
    from placer.cli.common import human_bytes, print_json
    from placer.graph_io import load_graph

    g = load_graph(args.graph)
    summary = {
        "name": g.name,
        "num_ops": len(g),
        "num_edges": g.num_edges,
        "total_flops": float(sum(op.flops for op in g.ops)),
        "param_bytes": float(sum(op.param_bytes for op in g.ops)),
        "output_bytes": float(sum(op.output_bytes for op in g.ops)),
        "colocation_groups": len(g.colocation_groups()),
        "valid": True,
    }
    if args.json:
        print_json(summary)
    else:
        print(f"{g.name}: valid, {len(g)} ops, {g.num_edges} edges, "
              f"{summary['total_flops'] / 1e9:.3g} GFLOP, weights {human_bytes(summary['param_bytes'])}, "
              f"{summary['colocation_groups']} colocation groups")
    return 0
