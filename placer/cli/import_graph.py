"""`placer import MODEL -o GRAPH`: a TensorFlow GraphDef (or any registered format) to our JSON graph."""

from __future__ import annotations

from pathlib import Path

from placer.cli.common import add_json_flag, check_name, output_file, quiet_tensorflow

# `placer.importers.FORMATS` as registered there, repeated so that --help imports no numpy
# (tests/placer/cli/test_import_graph.py checks the two agree).
BUILTIN_FORMATS = ("msr", "pipedream", "json", "pbtxt", "graphdef")


def add_parser(sub) -> None:
    p = sub.add_parser(
        "import", help="import a TensorFlow GraphDef (.pb/.pbtxt) or other model file into a graph file",
        description="Import MODEL (TensorFlow GraphDef .pb or .pbtxt, our JSON graph, or another registered "
                    "format; detected from the content) into the JSON graph format, with output shapes, "
                    "bytes, FLOPs, weight bytes and colocation for every op.")
    p.add_argument("model", help="model file")
    p.add_argument("-o", "--output", required=True, help="graph file to write (.json or .json.gz)")
    p.add_argument("--format", dest="fmt", metavar="FMT",
                   help=f"input format, one of {', '.join(BUILTIN_FORMATS)} (default: detected from the content)")
    p.add_argument("--name", help="graph name (default: the file name)")
    p.add_argument("--batch", type=int, help="GraphDef: batch size filled into placeholders' unknown first dimension")
    p.add_argument("--input-shape", action="append", default=[], metavar="NODE=D1,D2,...",
                   help="GraphDef: full shape of a placeholder (repeatable)")
    p.add_argument("--no-fold", action="store_true", help="GraphDef: keep Const and NoOp nodes as ops")
    p.add_argument("--fetch", action="append", default=[], metavar="NODE",
                   help="GraphDef: a node or tensor one step runs (a session's fetch or target, e.g. the "
                        "train op or loss:0; repeatable); nodes no fetch needs, such as variable "
                        "initializers, are left out, as a session leaves them out (default: keep every node)")
    p.add_argument("--allow-unknown-shapes", action="store_true",
                   help="GraphDef: treat dimensions shape inference cannot fix as 1 instead of failing")
    p.add_argument("--cluster-out", metavar="FILE",
                   help="MSR workload: also write the cluster it defines (maxFPGAs accelerators with "
                        "maxSizePerFPGA bytes, plus its CPUs) as a cluster JSON file")
    add_json_flag(p, "the summary")
    p.set_defaults(run=run)


def parse_input_shapes(items: list[str]) -> dict[str, list[int]]:
    """``["x=32,224,224,3"]`` -> ``{"x": [32, 224, 224, 3]}``; bad syntax is a one-line error."""
    from placer.errors import PlacerError

    shapes = {}
    for item in items:
        node, sep, dims = item.partition("=")
        try:
            if not sep or not node:
                raise ValueError
            shapes[node] = [int(d) for d in dims.split(",")] if dims.strip() else []
            if any(d < 0 for d in shapes[node]):
                raise ValueError
        except ValueError:
            raise PlacerError(f"--input-shape {item!r}: expected NODE=D1,D2,... with non-negative integers") from None
    return shapes


def summarise(graph, path) -> dict:
    """The facts both import commands print."""
    m = graph.meta
    return {
        "name": graph.name, "output": str(path), "ops": len(graph), "edges": graph.num_edges,
        "tf_node_count": m.get("tf_node_count"), "folded": m.get("folded"), "pruned": m.get("pruned"),
        "total_flops": float(sum(op.flops for op in graph)),
        "variable_bytes": m.get("variable_bytes"),
        "flops_fallback": m.get("flops_fallback"), "colocation_groups": len(graph.colocation_groups()),
    }


def print_summary(s: dict) -> None:
    from placer.cli.common import human_bytes

    folded = ", ".join(f"{v} {k}" for k, v in (s["folded"] or {}).items()) or "nothing"
    fallback = sum((s["flops_fallback"] or {}).values())
    line = f"{s['name']}: {s['ops']} ops, {s['edges']} edges"
    if s["tf_node_count"] is not None:
        pruned = sum((s.get("pruned") or {}).values())
        line += (f" ({s['tf_node_count']} TF nodes; folded {folded}"
                 + (f"; pruned {pruned} that TensorFlow would not run" if pruned else "") + ")")
    line += f", {s['total_flops'] / 1e9:.4g} GFLOP"
    if s["variable_bytes"] is not None:
        line += f", variables {human_bytes(s['variable_bytes'])}"
    line += f", {s['colocation_groups']} colocation groups"
    if fallback:
        line += f", {fallback} ops without a FLOP rule (fallback: output elements)"
    print(line)
    print(f"wrote {s['output']}")
    if s.get("cluster_output"):
        print(f"wrote {s['cluster_output']} (the workload's cluster)")
    if s.get("graphdef_output"):
        print(f"wrote {s['graphdef_output']} (the traced GraphDef)")


def write_msr_cluster(path, fmt: str | None, graph_name: str, out: str) -> str:
    """Write the cluster an MSR workload defines (``--cluster-out``); other formats define none."""
    import json

    from placer.errors import ModelImportError
    from placer.fileio import parse_json_bytes, write_atomic
    from placer.importers import detect_format
    from placer.importers.msr import cluster_from_msr

    raw = path.read_bytes()
    if (fmt or detect_format(raw, str(path))) != "msr":
        raise ModelImportError(f"--cluster-out: {str(path)!r} is not an MSR workload; only those define a cluster")
    cluster = cluster_from_msr(parse_json_bytes(raw, f"MSR workload {str(path)!r}"), f"msr-{graph_name}")
    write_atomic(Path(out), json.dumps(cluster.to_dict(), indent=1).encode())
    return out


def run(args) -> int:
    quiet_tensorflow()
    from pathlib import Path

    from placer.cli.common import print_json
    from placer.errors import ModelImportError
    from placer.graph_io import save_graph
    from placer.importers import FORMATS, default_name, detect_format, import_file, read_model_bytes

    check_name(args.name)
    output_file(args.output, "-o")
    output_file(args.cluster_out, "--cluster-out")
    options = {}
    if args.batch is not None:
        if args.batch < 1:
            raise ModelImportError(f"--batch must be a positive integer, got {args.batch}")
        options["batch_size"] = args.batch
    if args.input_shape:
        options["input_shapes"] = parse_input_shapes(args.input_shape)
    if args.no_fold:
        options["fold"] = ()
    if args.allow_unknown_shapes:
        options["allow_unknown_shapes"] = True
    if args.fetch:
        options["fetches"] = args.fetch
        options["session"] = True  # a bare GraphDef's fetches are a session's: only what they need runs

    path = Path(args.model)
    if options:
        raw = read_model_bytes(path)
        fmt = args.fmt or detect_format(raw, str(path))
        if fmt not in ("graphdef", "pbtxt"):
            raise ModelImportError(f"--batch, --input-shape, --no-fold, --allow-unknown-shapes and --fetch apply to "
                                   f"GraphDef input; {str(path)!r} is {fmt}")
        from placer.importers.graphdef import from_graphdef_bytes, from_graphdef_text

        load = from_graphdef_bytes if fmt == "graphdef" else from_graphdef_text
        name = args.name or default_name(path)
        try:
            graph = load(raw, name, **options)
        except ModelImportError as e:
            raise ModelImportError(f"{str(path)!r}: {e}") from None
    else:
        if args.fmt and args.fmt not in FORMATS:
            raise ModelImportError(f"unknown format {args.fmt!r} (known: {', '.join(FORMATS)})")
        graph = import_file(path, args.fmt, args.name)
    cluster_output = write_msr_cluster(path, args.fmt, graph.name, args.cluster_out) if args.cluster_out else None
    save_graph(graph, args.output)
    summary = summarise(graph, args.output)
    if cluster_output:
        summary["cluster_output"] = cluster_output
    if args.json:
        print_json(summary)
    else:
        print_summary(summary)
    return 0
