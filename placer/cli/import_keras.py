"""`placer import-keras NAME --batch B -o GRAPH`: a keras.applications model's training step."""

from __future__ import annotations

from placer.cli.common import MAX_DIM, add_json_flag, output_file, quiet_tensorflow


def add_parser(sub) -> None:
    p = sub.add_parser(
        "import-keras", help="import a keras.applications model (untrained) as a training-step graph",
        description="Build keras.applications.NAME with weights=None (nothing is downloaded), trace one "
                    "training step (forward, loss, gradients, optimizer update) at a fixed batch size and "
                    "import it as a graph file.")
    p.add_argument("name", help="application name, e.g. resnet50, inception_v3, mobilenet_v2, densenet121")
    p.add_argument("--batch", type=int, required=True, help="batch size")
    p.add_argument("-o", "--output", required=True, help="graph file to write (.json or .json.gz)")
    p.add_argument("--input-shape", metavar="H,W,C", help="image shape (default: the model's own)")
    p.add_argument("--classes", type=int, default=1000, help="number of classes (default 1000)")
    p.add_argument("--optimizer", default=None, help="Keras optimizer name (default SGD with momentum 0.9)")
    p.add_argument("--inference", action="store_true", help="import a forward pass only")
    p.add_argument("--save-graphdef", metavar="PB", help="also write the traced GraphDef (binary) here")
    p.add_argument("--no-prune", action="store_true",
                   help="keep the nodes TensorFlow leaves out of the step because nothing it returns or "
                        "updates needs them (as the graphs in graphs/ were imported)")
    add_json_flag(p, "the summary")
    p.set_defaults(run=run)


def run(args) -> int:
    quiet_tensorflow()
    from placer.cli.output import print_json
    from placer.cli.import_graph import print_summary, summarise
    from placer.errors import ModelImportError
    from placer.fileio import write_atomic
    from placer.graph_io import save_graph

    output_file(args.output, "-o")
    output_file(args.save_graphdef, "--save-graphdef")
    if not 1 <= args.batch <= MAX_DIM:
        raise ModelImportError(f"--batch must be a positive integer up to {MAX_DIM}, got {args.batch}")
    shape = None
    if args.input_shape:
        try:
            shape = [int(d) for d in args.input_shape.split(",")]
            if len(shape) != 3 or min(shape) < 1 or max(shape) > MAX_DIM:
                raise ValueError
        except ValueError:
            raise ModelImportError(f"--input-shape {args.input_shape!r}: expected H,W,C positive integers "
                                   f"up to {MAX_DIM}") from None

    from pathlib import Path

    from placer.importers.keras_models import application_model, from_tf_function, keras_step

    model = application_model(args.name, shape, args.classes)
    step = keras_step(model, args.batch, args.optimizer, training=not args.inference,
                      loss="categorical_crossentropy")
    meta = dict(step.meta)
    meta["source"] = f"keras.applications {args.name} (weights=None)"
    graph = from_tf_function(step.concrete_function(), step.signature, args.name,
                             variable_paths=step.variable_paths, meta=meta, prune=not args.no_prune)
    if args.save_graphdef:
        write_atomic(Path(args.save_graphdef), step.graph_def().SerializeToString())
    save_graph(graph, args.output)
    summary = summarise(graph, args.output)
    if args.save_graphdef:
        summary["graphdef_output"] = args.save_graphdef
    if args.json:
        print_json(summary)
    else:
        print_summary(summary)
    return 0
