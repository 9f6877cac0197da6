"""`placer import MODEL -o GRAPH`: a SavedModel folder, a .keras file, a TensorFlow GraphDef (or any
registered format) to our JSON graph."""

from __future__ import annotations

from pathlib import Path

from placer.cli.common import MAX_DIM, add_json_flag, check_name, output_file, quiet_tensorflow

# `placer.importers.FORMATS` as registered there, repeated so that --help imports no numpy
# (tests/placer/cli/test_import_graph.py checks the two agree).
BUILTIN_FORMATS = ("msr", "pipedream", "json", "pbtxt", "graphdef")


def add_parser(sub) -> None:
    p = sub.add_parser(
        "import", help="import a SavedModel, a .keras file, a TensorFlow GraphDef (.pb/.pbtxt) or other model "
                       "file into a graph file",
        description="Import MODEL into the JSON graph format, with output shapes, bytes, FLOPs, weight bytes "
                    "and colocation for every op: a SavedModel folder (one signature's inference graph), a "
                    ".keras file (one training step, with the loss and optimizer it was compiled with), a "
                    "TensorFlow GraphDef (.pb or .pbtxt), our JSON graph, or another registered format "
                    "(files are told apart by their content).")
    p.add_argument("model", help="model file, or SavedModel folder")
    p.add_argument("-o", "--output", required=True, help="graph file to write (.json or .json.gz)")
    p.add_argument("--format", dest="fmt", metavar="FMT",
                   help=f"input format, one of {', '.join(BUILTIN_FORMATS)} (default: detected from the content)")
    p.add_argument("--name", help="graph name (default: the file name)")
    p.add_argument("--batch", type=int,
                   help="batch size: filled into the unknown first dimension of a GraphDef's placeholders or a "
                        "SavedModel's inputs; a .keras file's training step is traced with it (required)")
    p.add_argument("--signature", metavar="NAME",
                   help="SavedModel: the signature to import (default serving_default, or its only one)")
    p.add_argument("--loss", metavar="NAME",
                   help=".keras: the Keras loss of the training step (default: the one it was compiled with)")
    p.add_argument("--optimizer", metavar="NAME",
                   help=".keras: the Keras optimizer of the training step (default: the one it was compiled "
                        "with, fresh slots)")
    p.add_argument("--inference", action="store_true", help=".keras: import a forward pass only")
    p.add_argument("--save-graphdef", metavar="PB",
                   help="SavedModel, .keras: also write the traced GraphDef (binary) here, for `placer measure "
                        "--graphdef`")
    p.add_argument("--input-shape", action="append", default=[], metavar="NODE=D1,D2,...",
                   help="GraphDef: full shape of a placeholder (repeatable)")
    p.add_argument("--no-fold", action="store_true", help="GraphDef: keep Const and NoOp nodes as ops")
    p.add_argument("--fetch", action="append", default=[], metavar="NODE",
                   help="GraphDef: a node or tensor one step runs (a session's fetch or target, e.g. the "
                        "train op or loss:0; repeatable); nodes no fetch needs, such as variable "
                        "initializers, are left out, as a session leaves them out (default: a tf.function's "
                        "outputs, its Identity nodes nothing reads, and its stateful ops; for other graphs "
                        "every node is kept)")
    p.add_argument("--no-prune", action="store_true",
                   help="GraphDef without --fetch: keep every node, even those a tf.function never runs")
    p.add_argument("--unknown-dim", type=int, metavar="N",
                   help="GraphDef, SavedModel: the estimate for dimensions no input shape fixes (data-dependent "
                        "ones, e.g. the rows of a sparse update) and for placeholders' unknown dimensions after "
                        "the batch; recorded in the graph's meta, and `placer validate` reports it (default: "
                        "such a dimension is an error)")
    p.add_argument("--allow-unknown-shapes", action="store_true",
                   help="GraphDef: the same as --unknown-dim 1")
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
            shape = [int(d) for d in dims.split(",")] if dims.strip() else []
            if any(not 0 <= d <= MAX_DIM for d in shape):
                raise ValueError
        except ValueError:
            raise PlacerError(f"--input-shape {item!r}: expected NODE=D1,D2,... with integers from 0 to "
                              f"{MAX_DIM}") from None
        if node in shapes:
            raise PlacerError(f"--input-shape given twice for {node!r}")
        shapes[node] = shape
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
        "fetches_from": m.get("fetches_from"), "unknown_dims": m.get("unknown_dims"),
    }


def print_summary(s: dict) -> None:
    from placer.cli.output import human_bytes, plural

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
    if s.get("fetches_from") == "tf.function outputs":
        print("  one step runs the tf.function's outputs (its Identity nodes nothing reads) and stateful ops, "
              "as TensorFlow does (--fetch NODE to choose, --no-prune to keep every node)")
    unknown = s.get("unknown_dims")
    if unknown:
        print(f"  ESTIMATED: {plural(len(unknown['ops']), 'op')} with dimensions no input fixes, each set to "
              f"{unknown['estimate']} (recorded in the graph's meta; `placer validate` reports them)")
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

    from placer.cli.output import print_json
    from placer.errors import ModelImportError
    from placer.graph_io import save_graph

    check_name(args.name)
    output_file(args.output, "-o", (args.model,))
    output_file(args.cluster_out, "--cluster-out")
    output_file(args.save_graphdef, "--save-graphdef", (args.model,))
    for flag, value in (("--batch", args.batch), ("--unknown-dim", args.unknown_dim)):
        if value is not None and not 1 <= value <= MAX_DIM:
            raise ModelImportError(f"{flag} must be an integer from 1 to {MAX_DIM}, got {value}")
    if args.unknown_dim is not None and args.allow_unknown_shapes:
        raise ModelImportError("--allow-unknown-shapes is --unknown-dim 1; give one of them")
    path = Path(args.model)
    saved = _saved_kind(path)
    if saved is None:
        given = [f for f, v in (("--signature", args.signature), ("--loss", args.loss),
                                ("--optimizer", args.optimizer), ("--inference", args.inference),
                                ("--save-graphdef", args.save_graphdef)) if v]
        if given:
            raise ModelImportError(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to a SavedModel "
                                   f"folder or a .keras file; {str(path)!r} is neither")
        graph = _import_file(args, path)
        graph_def = None
    else:
        graph, graph_def = _import_saved(args, path, saved)
    cluster_output = write_msr_cluster(path, args.fmt, graph.name, args.cluster_out) if args.cluster_out else None
    if graph_def is not None and args.save_graphdef:
        from placer.fileio import write_atomic

        write_atomic(Path(args.save_graphdef), graph_def.SerializeToString())
    save_graph(graph, args.output)
    summary = summarise(graph, args.output)
    if cluster_output:
        summary["cluster_output"] = cluster_output
    if args.save_graphdef:
        summary["graphdef_output"] = args.save_graphdef
    if args.json:
        print_json(summary)
    else:
        print_summary(summary)
    return 0


def _saved_kind(path: Path) -> str | None:
    """``saved_model`` for a SavedModel folder, ``keras`` for a .keras file, None for any other file.

    Raises
    ------
    ModelImportError
        For a folder that is no SavedModel.
    """
    from placer.errors import ModelImportError
    from placer.importers.saved_models import SAVED_MODEL_FILES, is_keras_file, is_saved_model

    if path.is_dir():
        if not is_saved_model(path):
            raise ModelImportError(f"{str(path)!r} is a folder but not a SavedModel (no "
                                   f"{' or '.join(SAVED_MODEL_FILES)} in it)")
        return "saved_model"
    if path.suffix == ".keras" or is_keras_file(path):
        return "keras"
    return None


def _import_saved(args, path: Path, kind: str):
    """A SavedModel's signature or a .keras file's step, and its GraphDef; options that apply to neither refused."""
    from placer.errors import ModelImportError
    from placer.importers.saved_models import from_keras_file, from_saved_model

    what = "a SavedModel" if kind == "saved_model" else "a .keras file"
    other = [f for f, v in (("--fetch", args.fetch), ("--no-fold", args.no_fold), ("--format", args.fmt),
                            ("--allow-unknown-shapes", args.allow_unknown_shapes), ("--no-prune", args.no_prune),
                            ("--cluster-out", args.cluster_out)) if v]
    if kind == "saved_model":
        other += [f for f, v in (("--loss", args.loss), ("--optimizer", args.optimizer),
                                 ("--inference", args.inference)) if v]
    else:
        other += [f for f, v in (("--signature", args.signature), ("--input-shape", args.input_shape),
                                 ("--unknown-dim", args.unknown_dim)) if v]
    if other:
        raise ModelImportError(f"{', '.join(other)} do{'es' if len(other) == 1 else ''} not apply to {what} "
                               f"({str(path)!r})")
    if kind == "saved_model":
        options = {"input_shapes": parse_input_shapes(args.input_shape)} if args.input_shape else {}
        return from_saved_model(path, args.name, signature=args.signature, batch_size=args.batch,
                                unknown_dim=args.unknown_dim, with_graph_def=True, **options)
    if args.batch is None:
        raise ModelImportError(f"{str(path)!r}: give the batch size of the training step (--batch)")
    return from_keras_file(path, args.batch, args.name, loss=args.loss, optimizer=args.optimizer,
                           training=not args.inference, with_graph_def=True)


def _import_file(args, path: Path):
    """A GraphDef (with its options; a tf.function's fetches found unless --fetch or --no-prune) or any
    registered format."""
    from placer.errors import ModelImportError
    from placer.importers import FORMATS, default_name, detect_format, import_file, read_model_bytes

    options = {}
    if args.batch is not None:
        options["batch_size"] = args.batch
    if args.input_shape:
        options["input_shapes"] = parse_input_shapes(args.input_shape)
    if args.no_fold:
        options["fold"] = ()
    if args.allow_unknown_shapes or args.unknown_dim is not None:
        options["unknown_dim"] = args.unknown_dim or 1
    if args.fetch:
        options["fetches"] = args.fetch
        options["session"] = True  # a bare GraphDef's fetches are a session's: only what they need runs
    if args.no_prune:
        if args.fetch:
            raise ModelImportError("--no-prune keeps every node; --fetch keeps what the fetches need: give one")
        options["find_fetches"] = False
    if args.fmt and args.fmt not in FORMATS:
        raise ModelImportError(f"unknown format {args.fmt!r} (known: {', '.join(FORMATS)})")
    raw = read_model_bytes(path)
    fmt = args.fmt or detect_format(raw, str(path))
    name = args.name or default_name(path)
    if fmt not in ("graphdef", "pbtxt"):
        if options:
            given = [f for f, v in (("--batch", args.batch), ("--input-shape", args.input_shape),
                                    ("--no-fold", args.no_fold), ("--unknown-dim", args.unknown_dim),
                                    ("--allow-unknown-shapes", args.allow_unknown_shapes), ("--fetch", args.fetch),
                                    ("--no-prune", args.no_prune)) if v]
            raise ModelImportError(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to GraphDef "
                                   f"input; {str(path)!r} is {fmt}")
        return import_file(path, fmt, args.name)
    from placer.importers.graphdef import from_graphdef_bytes, from_graphdef_text

    options.setdefault("find_fetches", "fetches" not in options)
    load = from_graphdef_bytes if fmt == "graphdef" else from_graphdef_text
    try:
        return load(raw, name, **options)
    except ModelImportError as e:
        raise ModelImportError(f"{str(path)!r}: {e}") from None
