"""`placer validate GRAPH`: check a graph file and summarise it."""

from __future__ import annotations

from placer.cli.common import GRAPH_FILE_HELP, add_json_flag


def add_parser(sub) -> None:
    p = sub.add_parser("validate", help="check a graph file and print a summary",
                       description="Check a graph file (JSON or .json.gz) and print its size, and what its "
                                   "import could not know (dimensions estimated with --unknown-dim, index "
                                   "tensors of data-dependent size).")
    p.add_argument("graph", help=GRAPH_FILE_HELP)
    add_json_flag(p, "the summary")
    p.set_defaults(run=run)


def run(args) -> int:
    from placer.cli.output import human_bytes, print_json
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
        **unknowns(g.meta),
    }
    if args.json:
        print_json(summary)
    else:
        print(f"{g.name}: valid, {len(g)} ops, {g.num_edges} edges, "
              f"{summary['total_flops'] / 1e9:.3g} GFLOP, weights {human_bytes(summary['param_bytes'])}, "
              f"{summary['colocation_groups']} colocation groups")
        for line in unknown_lines(summary):
            print("  " + line)
    return 0


def unknowns(meta: dict) -> dict:
    """What the graph's import could not know, from its meta: ``imported_with_unknowns`` and, when true,
    ``estimated_ops``, ``estimate``, ``index_ops`` (integer tensors of data-dependent size, 1 element
    each dimension) and ``unsized_resources`` (resource inputs of unknown size, counted 0 bytes)."""
    estimated = meta.get("unknown_dims") or {}
    ops = list(estimated.get("ops", []))
    index_ops = [n for n in meta.get("unknown_shape_ops", []) if n not in set(ops)]
    unsized = list(meta.get("unsized_resources", []))
    if not ops and not index_ops and not unsized:
        return {"imported_with_unknowns": False}
    return {"imported_with_unknowns": True, "estimated_ops": ops, "estimate": estimated.get("estimate"),
            "index_ops": index_ops, "unsized_resources": unsized}


def unknown_lines(summary: dict) -> list[str]:
    """`unknowns` in words."""
    from placer.cli.output import plural

    if not summary.get("imported_with_unknowns"):
        return []
    lines = []
    ops = summary["estimated_ops"]
    if ops:
        shown = ", ".join(ops[:3]) + (", ..." if len(ops) > 3 else "")
        lines.append(f"imported with unknowns: {plural(len(ops), 'op')} with dimensions no input fixes, each set to "
                     f"the estimate {summary['estimate']} (--unknown-dim): {shown}; its sizes are estimates")
    if summary["unsized_resources"]:
        shown = ", ".join(summary["unsized_resources"][:3]) + (", ..." if len(summary["unsized_resources"]) > 3 else "")
        lines.append(f"imported with unknowns: {plural(len(summary['unsized_resources']), 'resource')} of unknown "
                     f"size counted 0 bytes (variables read without a recorded shape?): {shown}")
    if summary["index_ops"]:
        lines.append(f"{plural(len(summary['index_ops']), 'op')} with integer index outputs of data-dependent size "
                     "counted as 1 element per unknown dimension")
    return lines
