"""`placer train GRAPH --cluster C --out DIR`: train the learned placer, resumably.

The REST service runs training jobs as subprocesses of exactly this command and reads the files it writes in
DIR (names are a contract, `placer.rl.run_folder`):

- ``progress.json``: rewritten atomically after every step: ``{"state": "running"|"done"|"interrupted"|"failed",
  "step", "samples", "elapsed_seconds", "budget_seconds", "best_step_time", "mean_reward", "entropy", "error"}``;
- ``best_placement.json``: the best placement so far (the Placement contract, method "rl"), written as soon as
  the run has one (its start, or a cold start's first step), then at each checkpoint and at the end;
- ``history.csv`` (one row per step, the policy's entropy and the entropy bonus's weight among its
  columns), ``curve.png`` (at the end);
- ``result.json`` (at the end): which start the run kept and why (`placer.rl.starts.kept`: ``{"kept":
  "zero-shot" | "heuristic:NAME" | "trained", "why", "step_times": {"zero_shot", "heuristic",
  "trained"}, ...}``), with the state, step count and best step time;
- ``trainer_state.json`` and ``checkpoint/``: what ``--resume`` continues from
  (with ``--starts K``: ``race_state.json``, and each start's in ``starts/N/``).

SIGINT (Ctrl-C) and SIGTERM finish the current step, save a checkpoint, mark
the run "interrupted" and exit with code 130.

A new run fine-tunes the shipped policy unless told otherwise (`placer.cli.train_start`) from its zero-shot answer,
steered op by op (`placer.rl.steering`), and never answers worse than it or the best heuristic (`placer.rl.starts`).
"""

from __future__ import annotations

import argparse

from placer.cli.common import (WARM_STARTS, add_graph_and_cluster, add_grouping_flags, add_json_flag, add_objective,
                               add_refine_sweeps, add_run_folder, check_at_least, check_budget, check_refine,
                               config_help, run_folder)
from placer.cli.train_session import DEFAULT_RAY_WORKERS, TrainSession
from placer.cli.train_start import (DEFAULT_INIT, NO_INIT, check_starts, given_config, policy_to_fine_tune, saved_run,
                                    scratch_only)

DEFAULT_BUDGET_SECONDS = 600.0


def add_parser(sub) -> None:
    p = sub.add_parser("train", help="train the learned placer (REINFORCE) on one graph and cluster",
                       description="Train the seq2seq placement policy with REINFORCE against the simulator. "
                                   "Writes DIR/best_placement.json, history.csv, curve.png, progress.json and a "
                                   "checkpoint; Ctrl-C or SIGTERM saves and stops, --resume continues.",
                       formatter_class=config_help("TrainConfig"))  # {field}: TrainConfig's default
    add_graph_and_cluster(p)
    add_run_folder(p)
    p.add_argument("--budget-seconds", type=float, default=None, metavar="S",
                   help="wall-clock budget of the training, resumes included: the heuristics (at most half of "
                        "it, their time caps shortened to fit), compiling and the steps count against it (at "
                        "least one step is taken, and a step under way finishes); start-up (importing TensorFlow, "
                        "loading the graph: a few seconds) and "
                        f"--refine-seconds come on top (default {DEFAULT_BUDGET_SECONDS:g} unless --steps is given)")
    p.add_argument("--steps", type=int, default=None, metavar="N", help="stop after N REINFORCE steps in all")
    p.add_argument("--seed", type=int, default=None, help="seed of weights and samples (default {seed})")
    p.add_argument("--samples", type=int, default=None, metavar="K",
                   help="placements sampled per step (default {samples})")
    p.add_argument("--groups", type=int, default=None, metavar="G",
                   help="most groups the ops are coarsened into (default {groups}; with --init the policy's)")
    add_objective(p, default=None,
                  help="reward from the simulated step time or from the pipelined max device load (throughput; "
                       "progress and history then report max loads in the *step_time columns; default {objective})")
    p.add_argument("--warm-start", choices=WARM_STARTS, default=None,
                   help="'heuristic': first imitate the best heuristic placement; 'none': the paper's cold start "
                        "(default {warm_start!r} with --init none; when fine-tuning 'none', start from the policy "
                        "alone, and 'heuristic' first imitates the best heuristic where it beats the policy). "
                        "Either way the run never answers worse than the best heuristic")
    p.add_argument("--warm-start-search", type=float, default=None, metavar="S",
                   help="first improve the heuristic warm start by S seconds of local search in the simulator "
                        "(step time objective; default {warm_start_search:g}: imitate the heuristic as it is); "
                        "where REINFORCE starts decides much of where it ends (docs/learned-placer.md)")
    p.add_argument("--imitation-fraction", type=float, default=None, metavar="F",
                   help="most of the budget the warm start's imitation may take (default {imitation_fraction:g})")
    p.add_argument("--entropy-floor", type=float, default=None, metavar="F",
                   help="per-group entropy, as a fraction of a uniform choice's, under which the entropy bonus "
                        "grows (default {entropy_floor:g}; 0: a fixed bonus)")
    p.add_argument("--world-sigma", type=float, default=None, metavar="S",
                   help="robust training: half of each step's reward comes from a world drawn around the nominal "
                        "one, op costs, bandwidths, latencies and GPU speed times lognormal factors of sigma S "
                        "(default {world_sigma:g}: the nominal world alone; simulated step-time rewards)")
    add_grouping_flags(p, "; trains from scratch: a policy decides its own groups",
                       critical_remark="; trains from scratch")
    p.add_argument("--starts", type=int, default=None, metavar="K",
                   help="race REINFORCE from the K fastest distinct heuristic placements (2-8; 1 races none), "
                        "keeping the faster half each round until one start has the rest of the budget "
                        "(successive halving; default 1: the fastest heuristic alone). Trains from scratch; not "
                        "with --init, --ray or --reward measured")
    p.add_argument("--init", metavar="POLICY",
                   help="the pre-trained policy to fine-tune: a folder (`placer pretrain`), 'shipped' for the "
                        f"package's own (the default, '{DEFAULT_INIT}', unless --starts or a grouping flag is "
                        "given, or the policy cannot address the cluster), or 'none' to train from scratch. A "
                        "fine-tune starts from the policy's zero-shot answer, without a heuristic warm start "
                        "unless --warm-start heuristic. With --resume it may be left out, or must name what the "
                        "run started from")
    p.add_argument("--steer", action=argparse.BooleanOptionalAction, default=None,
                   help="a fine-tune starts from the policy's answer steered op by op (docs/pretrained-policy.md; "
                        "the default); --no-steer: from the answer unsteered. Refused with --init none or --starts")
    p.add_argument("--refine-seconds", type=float, default=None, metavar="S",
                   help="when training ends (not when interrupted), improve its best placement by S seconds of "
                        "local search in the simulator and write DIR/refined_placement.json (step time objective)")
    add_refine_sweeps(p)
    p.add_argument("--ray", metavar="ADDRESS", default=None,
                   help="score each step's samples on Ray workers (simulated, or with --reward measured timed in "
                        "TensorFlow on each worker's machine): 'auto' (a running Ray cluster, else a local one) "
                        "or a Ray address; without it nothing starts Ray")
    p.add_argument("--ray-workers", type=int, default=None, metavar="N",
                   help=f"with --ray: Ray workers (default {DEFAULT_RAY_WORKERS})")
    p.add_argument("--reward", choices=("simulated", "measured"), default="simulated",
                   help="simulated (default): step times from the simulator; measured: each sample run for real "
                        "in TensorFlow (slow; the graph must carry its GraphDef, see `placer measure`)")
    add_json_flag(p, "a summary of the run")
    p.set_defaults(run=run)


def run(args) -> int:
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from placer.errors import PlacerError

    out = run_folder(args.out)
    check_budget(args.budget_seconds)
    check_at_least(args, "steps", "ray_workers")
    check_refine(args.refine_seconds, args.refine_sweeps, args.objective)
    if args.ray_workers is not None and args.ray is None:  # it was ignored, and the run went on without Ray
        raise PlacerError("--ray-workers goes with --ray (the Ray cluster to run them on)")
    explicit_init = args.init is not None and args.init != NO_INIT
    for flag, value in (("--kind-groups", args.kind_groups), ("--balanced-groups", args.balanced_groups),
                        ("--critical-groups", args.critical_groups)):
        if value is not None and explicit_init:
            flag = flag if value else flag.replace("--", "--no-", 1)
            raise PlacerError(f"{flag} does not go with --init: a fine-tune groups ops as its policy was trained to "
                              "(the policy card says how)")
    if args.warm_start_search is not None and args.warm_start_search > 0:
        if args.objective == "throughput":
            raise PlacerError("--warm-start-search improves step time, not 'throughput'")
        fine_tunes = args.init != NO_INIT and (explicit_init or not scratch_only(args))
        if args.warm_start == "none" or (fine_tunes and args.warm_start != "heuristic"):
            raise PlacerError("--warm-start-search improves the heuristic warm start"
                              + ((": with --init, add --warm-start heuristic" if explicit_init else
                                  f": fine-tuning (the default, --init {DEFAULT_INIT}), add --warm-start heuristic, "
                                  "or train from scratch with --init none") if fine_tunes else
                                 ", not --warm-start none"))
    if args.world_sigma and args.reward == "measured":
        raise PlacerError("--world-sigma draws worlds around the simulator's; it does not go with --reward measured")
    check_starts(args)
    from placer.cli.common import checked_config, load_graph_and_cluster
    from placer.rl.config import TrainConfig

    checked_config(TrainConfig(**given_config(args)))
    graph, cluster = load_graph_and_cluster(args)
    if args.reward == "measured":  # before the run folder is made: nothing left behind
        from placer.measure.source import require_embedded_graphdef

        require_embedded_graphdef(graph, "--reward measured")
    saved, raced = saved_run(args, out, graph, cluster)
    policy = policy_to_fine_tune(args, cluster) if saved is None and raced is None else None
    budget = args.budget_seconds
    if budget is None and args.steps is None:
        budget = DEFAULT_BUDGET_SECONDS
    return TrainSession(args, out, budget, graph, cluster, saved, raced, policy).run()
