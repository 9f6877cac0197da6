"""`placer export GRAPHDEF --placement P -o placed.pb`: the GraphDef with every NodeDef.device set."""

from __future__ import annotations

from placer.cli.common import add_json_flag, add_placement_option, output_file, quiet_tensorflow


def add_parser(sub) -> None:
    p = sub.add_parser(
        "export", help="write a GraphDef with every node pinned to its placed device",
        description="Write GRAPHDEF (a .pb/.pbtxt, or a graph file with its GraphDef embedded) with every "
                    "NodeDef.device set from PLACEMENT; nodes the importer folded (Const, NoOp) go with their "
                    "first consumer. Load it with tf.graph_util.import_graph_def and run it as usual.")
    p.add_argument("graph", help="GraphDef (.pb/.pbtxt) or graph file with its GraphDef embedded")
    add_placement_option(p)
    p.add_argument("--graphdef", help="the GraphDef GRAPH was imported from (when GRAPH is a JSON graph without it)")
    p.add_argument("-o", "--output", required=True, help="placed GraphDef to write (.pbtxt: text format)")
    add_json_flag(p, "a summary")
    p.set_defaults(run=run)


def run(args) -> int:
    quiet_tensorflow()
    from collections import Counter

    from placer.cli.output import print_json
    from placer.measure.export import write_placed_graphdef
    from placer.measure.source import load_runnable
    from placer.placement import load_placement

    output_file(args.output, "-o", (args.graph, args.placement, args.graphdef))
    placement = load_placement(args.placement)
    graph, graph_def = load_runnable(args.graph, args.graphdef, need_input_shapes=False, placed=placement.devices)
    placed = write_placed_graphdef(graph, graph_def, placement, args.output)
    per_device = dict(sorted(Counter(n.device for n in placed.node).items()))
    if args.json:
        print_json({"graph": graph.name, "output": args.output, "nodes": len(placed.node), "devices": per_device})
    else:
        print(f"{graph.name}: {len(placed.node)} nodes pinned ("
              + ", ".join(f"{d}: {k}" for d, k in per_device.items()) + f"); wrote {args.output}")
    return 0
