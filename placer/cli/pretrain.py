"""`placer pretrain CORPUS --cluster C... --budget-seconds S --out DIR`: one policy for many graphs.

Trains one placement policy over every training graph of a corpus
(``python -m corpus.make_corpus`` makes one) on every cluster given; see
`placer.rl.pretrain`. Writes DIR/policy (the policy: ``placer place --method
rl --policy DIR/policy``, ``placer train --init DIR/policy``), history.csv,
curve.png, progress.json, teachers.json and a checkpoint; Ctrl-C or SIGTERM
saves and stops, ``--resume`` continues (with the run's saved settings; flags
given change them). ``--init POLICY`` continues pre-training from a policy
(REINFORCE only unless ``--imitation-fraction`` says otherwise).
"""

from __future__ import annotations

from placer.cli.common import (EXIT_INTERRUPTED, StopOnSignal, add_grouping_flags, add_json_flag, add_run_folder,
                               check_at_least, check_budget, check_name, check_resume, checked_config, claim_run_folder,
                               config_help, run_folder)
from placer.cli.output import LogLines

DEFAULT_CLUSTERS = ("2gpu", "4gpu", "8gpu")
DEFAULT_BUDGET_SECONDS = 1800.0


def add_parser(sub) -> None:
    p = sub.add_parser("pretrain", help="pre-train one placement policy over a corpus of graphs and clusters",
                       description="Pre-train the placement policy over a corpus (imitation of cheap heuristics, "
                                   "then REINFORCE across graphs and clusters). The policy is exported to "
                                   "DIR/policy for zero-shot placement and fine-tuning.",
                       formatter_class=config_help("PretrainConfig"))  # {field}: PretrainConfig's default
    p.add_argument("corpus", help="corpus folder or its manifest.json (see python -m corpus.make_corpus)")
    p.add_argument("--cluster", nargs="+", default=list(DEFAULT_CLUSTERS), metavar="C",
                   help=f"presets or cluster files to train on (default: {' '.join(DEFAULT_CLUSTERS)})")
    add_run_folder(p)
    p.add_argument("--budget-seconds", type=float, default=DEFAULT_BUDGET_SECONDS, metavar="S",
                   help="wall-clock budget of the training steps, resumes included "
                        f"(default {DEFAULT_BUDGET_SECONDS:g})")
    p.add_argument("--groups", type=int, default=None, metavar="G",
                   help="most groups per graph (default {groups}, or the --init policy's)")
    p.add_argument("--samples", type=int, default=None, metavar="K",
                   help="samples per REINFORCE step (default {samples})")
    p.add_argument("--hidden", type=int, default=None, help="LSTM units (default {hidden}, or the --init policy's)")
    p.add_argument("--seed", type=int, default=None, help="seed of weights and samples (default {seed})")
    p.add_argument("--load-aware", action="store_true", default=None,
                   help="the decoder also reads each device's load so far (compute, memory, share of the group's "
                        "inputs, how much slower and how much later the group would finish there); with --init, "
                        "its load weights start at zero (default {load_aware}, or as the --init policy)")
    add_grouping_flags(p, ", or as the --init policy")
    p.add_argument("--teachers", nargs="+", default=None, metavar="METHOD",
                   help="heuristics whose fastest placement each graph imitates first "
                        "(default: the fast ones, {teachers})")
    p.add_argument("--refine-teachers", type=float, default=None, metavar="S",
                   help="improve each training pair's teacher by S seconds of local search in the simulator "
                        "before imitating it (default {refine_teachers:g}; validation pairs keep theirs)")
    p.add_argument("--world-sigma", type=float, default=None, metavar="S",
                   help="robust training: half of each REINFORCE reward comes from a world drawn around the nominal "
                        "one, op costs, bandwidths, latencies and GPU speed times lognormal factors of sigma S "
                        "(default {world_sigma:g}: the nominal world alone)")
    p.add_argument("--init", metavar="POLICY",
                   help="start from this policy folder's weights, or 'shipped' for the package's own, instead of "
                        "random ones (pre-training continued; ignored by --resume, whose checkpoint holds the weights)")
    p.add_argument("--imitation-fraction", type=float, default=None, metavar="F",
                   help="share of the budget spent imitating the teachers before REINFORCE "
                        "(default {imitation_fraction:g}; 0 with --init)")
    p.add_argument("--export", default=None, metavar="RULE",
                   help="what DIR/policy holds: 'validation', the checkpoint fastest on the validation graphs, or "
                        "'last', the latest (default {export!r})")
    p.add_argument("--max-graphs", type=int, default=None, metavar="N", help="use only the first N training graphs")
    p.add_argument("--graphs", nargs="+", default=None, metavar="NAME",
                   help="train on these of the corpus's training graphs only (names from its manifest; "
                        "a specialist, e.g. the convolutional ones at the suite's scale)")
    p.add_argument("--name", default=None,
                   help="the policy's name in its card (default placer-pretrained, or the resumed run's)")
    p.add_argument("--version", default=None, help="the policy's version in its card (default 1, or the resumed run's)")
    add_json_flag(p, "a summary")
    p.set_defaults(run=run)


def run(args) -> int:
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import sys
    import time

    from tqdm import tqdm

    from placer.cli.output import print_json
    from placer.presets import load_cluster
    from placer.graph_io import load_graph
    from placer.rl import pretrain

    check_name(args.name)
    check_name(args.version, "--version")
    check_at_least(args, "max_graphs")
    out = run_folder(args.out)
    check_budget(args.budget_seconds)
    resuming = check_resume(out, (out / pretrain.STATE_FILE).exists(), args.resume, "pre-training run")
    start = None
    if resuming:
        defaults = pretrain.saved_config(out)
    elif args.init is not None:
        from placer.rl.saved_policy import load_policy

        start = load_policy(args.init)
        defaults = {"hidden": start.hidden, "groups": start.groups, "imitation_fraction": 0.0,
                    "load_aware": start.load_aware, "kind_groups": start.kind_groups,
                    "balanced_groups": start.balanced_groups, "critical_groups": start.critical_groups}
    else:
        defaults = {}
    given = {k: v for k, v in (("groups", args.groups), ("samples", args.samples), ("hidden", args.hidden),
                               ("seed", args.seed), ("teachers", args.teachers and tuple(args.teachers)),
                               ("imitation_fraction", args.imitation_fraction), ("export", args.export),
                               ("refine_teachers", args.refine_teachers), ("world_sigma", args.world_sigma),
                               ("load_aware", args.load_aware),
                               ("kind_groups", args.kind_groups), ("balanced_groups", args.balanced_groups),
                               ("critical_groups", args.critical_groups))
             if v is not None}
    config = checked_config(pretrain.PretrainConfig(**{**defaults, **given}))
    card = pretrain.exported_card(out) if resuming else {}
    name = args.name or card.get("name", "placer-pretrained")
    version = args.version or card.get("version", "1")
    clusters = [load_cluster(c) for c in dict.fromkeys(args.cluster)]
    folder, manifest = pretrain.read_manifest(args.corpus)
    entries = pretrain.chosen_entries(pretrain.training_entries(manifest), args.graphs)[: args.max_graphs]
    validation = pretrain.validation_entries(manifest)
    graphs = [load_graph(folder / e["path"]) for e in entries]
    val_graphs = [load_graph(folder / e["path"]) for e in validation]
    if resuming:
        pretrain.check_same_environments(out, [(g, c) for g in graphs for c in clusters])
    out.mkdir(parents=True, exist_ok=True)
    lock = claim_run_folder(out, "pre-training run")  # noqa: F841 (held until the process ends)

    cached = pretrain.load_teachers(out)
    t0 = time.perf_counter()
    # in a log file (stderr no terminal) tqdm's bars are off: a line every 10 s per phase instead
    log_setup, log_steps, log_tuning = LogLines(), LogLines(), LogLines()
    total = (len(entries) + len(validation)) * len(clusters)
    bar = tqdm(total=total, desc="environments", unit="env", file=sys.stderr, disable=None)

    def environments(chosen, refine_seconds, before=()):
        made = []
        for graph in chosen:
            for c in clusters:
                env = pretrain.make_environment(graph, c, config.groups, config.teachers,
                                                cached.get(pretrain.env_key(graph, c)), refine_seconds,
                                                config.kind_groups, config.balanced_groups, config.critical_groups)
                made.append(env)
                pretrain.save_teachers(out, [*before, *made], config.kind_groups, config.balanced_groups,
                                       config.critical_groups, config.teachers, keep=cached)
                bar.update(1)
                log_setup(lambda: f"environments {len(before) + len(made)}/{total} (teachers placed)")
        return made

    envs = environments(graphs, config.refine_teachers)
    val_envs = environments(val_graphs, 0.0, before=envs)
    bar.close()
    pretrain.save_teachers(out, envs + val_envs, config.kind_groups, config.balanced_groups,
                           config.critical_groups, config.teachers)
    setup = time.perf_counter() - t0

    trainer = pretrain.Pretrainer(envs, config, validation=val_envs)
    if resuming:
        pretrain.restore(trainer, out)
    elif start is not None:
        pretrain.start_from(trainer, start)
    bar = tqdm(total=None, initial=trainer.state.step, unit="step", file=sys.stderr, disable=None, desc="pretrain")

    def on_step(row):
        last = trainer.state.evals[-1] if trainer.state.evals else {}
        # the greedy ratio comes from the last evaluation (every few hundred steps), so say which
        shown = (f"greedy/teacher {last['geomean_ratio']:.3f} at step {last['step']}" if "geomean_ratio" in last
                 else "greedy/teacher not evaluated yet")
        bar.set_description(row["phase"], refresh=False)
        bar.set_postfix_str(f"{row['elapsed_seconds']:.0f}/{args.budget_seconds:.0f} s, loss {row['loss']:.2f}, "
                            f"{shown}", refresh=False)
        bar.update(1)
        log_steps(lambda: f"{row['phase']} step {row['step']} | {row['elapsed_seconds']:.0f}/"
                          f"{args.budget_seconds:.0f} s | loss {row['loss']:.2f} | {shown}")

    from placer.rl.sampling import TEMPERATURES

    tuning = None

    def on_temperature(t, ratio):
        nonlocal tuning
        if tuning is None:
            bar.close()
            tuning = tqdm(total=len(TEMPERATURES), unit="temperature", file=sys.stderr, disable=None,
                          desc=f"sampling temperature on {len(val_envs)} validation pairs")
        tuning.set_postfix_str(f"{t:g}: {ratio:.3f}x the teachers", refresh=False)
        tuning.update(1)
        log_tuning(lambda: f"sampling temperature {t:g}: {ratio:.3f}x the teachers on the validation pairs")

    with StopOnSignal() as stop:
        try:
            reason = pretrain.run(trainer, out, budget_seconds=args.budget_seconds, name=name,
                                  version=version, on_step=on_step, should_stop=lambda: stop.requested,
                                  resumed=resuming, on_temperature=on_temperature)
        finally:
            bar.close()
            if tuning is not None:
                tuning.close()
    last = trainer.state.evals[-1]
    sampling = pretrain.exported_card(out).get("sampling")
    summary = {"state": reason, "environments": len(envs), "graphs": len(entries),
               "clusters": [c.name for c in clusters], "steps": trainer.state.step,
               "imitation_steps": trainer.state.imitation_steps, "elapsed_seconds": trainer.state.elapsed_seconds,
               "setup_seconds": setup, "greedy_geomean_ratio_to_teacher": last["geomean_ratio"],
               "validation_graphs": len(validation), "exported": trainer.exported or None,
               "sampling": sampling, "init": trainer.init,
               "policy": str(out / pretrain.POLICY_DIR)}
    if args.json:
        print_json(summary)
    else:
        if trainer.init:
            print(f"started from policy {trainer.init['name']} v{trainer.init['version']}")
        print(f"pre-trained on {len(entries)} graphs x {len(clusters)} clusters: {trainer.state.step} steps "
              f"({trainer.state.imitation_steps} imitation) in {trainer.state.elapsed_seconds:.0f} s; greedy "
              f"placements at {last['geomean_ratio']:.3f}x the teachers' step time (geometric mean)")
        exported = trainer.exported
        if exported:
            why = "the last" if config.export == "last" else f"fastest on the {len(validation)} validation graphs"
            print(f"exported the step-{exported['step']} checkpoint, {why} "
                  f"({exported['validation_geomean_ratio']:.3f}x the teachers on the validation graphs)")
        if sampling:
            sweep, t = sampling["geomean_ratio_to_teacher"], f"{sampling['temperature']:g}"
            print(f"zero-shot samples drawn at temperature {t}: best of greedy + {sampling['samples']} samples "
                  f"{sweep[t]:.3f}x the teachers on the validation graphs (temperature 1: "
                  f"{sweep.get('1', float('nan')):.3f}x)")
        print(f"policy in {out / pretrain.POLICY_DIR}")
    if reason == "interrupted":
        print(f"placer pretrain: interrupted; checkpoint saved in {str(out)!r} (continue with --resume)",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    return 0
