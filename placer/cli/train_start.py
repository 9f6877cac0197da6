"""Where a ``placer train`` run starts: a run saved in its folder (checked against the command), a
pre-trained policy to fine-tune, or nothing (from scratch); and the line that says which start it kept.

A new run fine-tunes the shipped policy (`DEFAULT_INIT`) unless told otherwise (``--init none``,
``--init DIR``), asked for what only training from scratch does (`SCRATCH_ONLY`), or given a cluster the
policy cannot address. `placer.cli.train` runs what is decided here.
"""

from __future__ import annotations

from placer.cli.common import check_resume

DEFAULT_INIT = "shipped"
"""What a new run fine-tunes without --init: the shipped policy, whose zero-shot answer a run from scratch
takes minutes to catch up with (docs/learned-placer.md)."""
NO_INIT = "none"
"""--init none: train from scratch (with the heuristic warm start, unless --warm-start none)."""
SCRATCH_ONLY = ("starts", "kind_groups", "balanced_groups", "critical_groups")
"""Flags only a run from scratch takes (a race of heuristic starts; the grouping, which a policy decides):
given without --init, they mean --init none."""

def scratch_only(args) -> list[str]:
    """The flags given that only a run from scratch takes (`SCRATCH_ONLY`)."""
    return [f"--{name.replace('_', '-')}" for name in SCRATCH_ONLY
            if getattr(args, name, None) is not None and not (name == "starts" and args.starts == 1)]


def policy_to_fine_tune(args, cluster):
    """The `SavedPolicy` a new run fine-tunes, or None to train from scratch (saying why on stderr when
    the default was set aside). A fine-tune steers its start unless told not to (`placer.rl.steering.steers`);
    ``--steer`` given steers the policy's answer, so a run from scratch refuses it."""
    import sys

    from placer.errors import PlacerError
    from placer.rl.finetune import can_place
    from placer.rl.saved_policy import load_policy

    scratch = scratch_only(args)
    if getattr(args, "steer", None):
        why = ("--init none" if args.init == NO_INIT else ", ".join(scratch) if scratch and args.init is None
               else None)
        if why:
            raise PlacerError(f"--steer starts a fine-tune from the policy's steered answer, and {why} trains "
                              "from scratch")
    if args.init == NO_INIT:
        return None
    if args.init is not None:
        return load_policy(args.init)
    if scratch:
        print(f"note: {', '.join(scratch)} trains from scratch (as --init none), not from the shipped policy",
              file=sys.stderr)
        return None
    policy = load_policy(DEFAULT_INIT)
    if not can_place(policy, cluster):
        if getattr(args, "steer", None):
            raise PlacerError(f"--steer starts a fine-tune from the policy's steered answer, and the shipped "
                              f"policy cannot address {cluster.name!r} ({len(cluster)} devices)")
        print(f"note: the shipped policy cannot address {cluster.name!r} ({len(cluster)} devices); training "
              "from scratch", file=sys.stderr)
        return None
    return policy


def given_config(args) -> dict:
    """The `TrainConfig` fields given on the command line (a resume must match the saved run on these)."""
    return {k: v for k, v in (("seed", args.seed), ("samples", args.samples), ("groups", args.groups),
                              ("warm_start", args.warm_start), ("objective", args.objective),
                              ("warm_start_search", args.warm_start_search),
                              ("imitation_fraction", getattr(args, "imitation_fraction", None)),
                              ("entropy_floor", getattr(args, "entropy_floor", None)),
                              ("world_sigma", getattr(args, "world_sigma", None)),
                              ("kind_groups", getattr(args, "kind_groups", None)),
                              ("balanced_groups", getattr(args, "balanced_groups", None)),
                              ("critical_groups", getattr(args, "critical_groups", None))) if v is not None}


def saved_run(args, out, graph, cluster) -> tuple[dict | None, dict | None]:
    """The run saved in DIR, as (trainer state, race state), each None when absent, checked against this command.

    Everything a resume can get wrong is refused here, before DIR is touched:
    a run where none was asked for, --resume where there is none, and another
    graph, cluster, --starts or setting than the run was trained with.
    """
    from placer.errors import PlacerError
    from placer.rl import checkpoint, race

    saved = checkpoint.load_state(out)
    raced = race.load_race_state(out)
    orphans = saved is None and raced is None and any((out / checkpoint.CHECKPOINT_DIR).glob("*"))
    if not check_resume(out, saved is not None or raced is not None, args.resume, "training run", orphans):
        return None, None
    starts = getattr(args, "starts", None)
    if raced is not None:
        if starts is not None and starts != raced["starts"]:
            raise PlacerError(f"cannot resume with --starts {starts}: the run in {str(out)!r} races "
                              f"{raced['starts']} starts")
        race.check_resumable(raced, graph, cluster, out)
        trained_with = vars(checkpoint.config_of(raced))  # a field saved before it existed: its value then
    else:
        if starts is not None and starts > 1:
            raise PlacerError(f"the run in {str(out)!r} trained from one warm start; resume it without --starts")
        checkpoint.check_same_problem(saved, graph, cluster, out)
        trained_with = vars(checkpoint.config_of(saved))
    if args.init is not None:
        _check_init(args.init, None if raced is not None else saved, out)
    for key, value in given_config(args).items():
        if trained_with.get(key) != value:
            raise PlacerError(f"cannot resume with {key}={value!r}: the run in {str(out)!r} was trained "
                              f"with {key}={trained_with.get(key)!r}")
    objective = trained_with.get("objective", "step_time")
    if args.refine_seconds is not None and objective != "step_time":
        raise PlacerError(f"--refine-seconds refines step time; the run in {str(out)!r} optimises {objective!r}")
    return saved, raced


def _check_init(init: str, saved: dict | None, out) -> None:
    """--init with --resume: the saved run must be a fine-tune of that policy (or of a member of its pool).

    Else a mistyped folder, another policy, or a run trained from scratch would resume silently as if it
    were the fine-tune asked for. The service resumes its jobs with the flags they began with.
    """
    from placer.errors import PlacerError
    from placer.rl.finetune import WARM_START_METHOD
    from placer.rl.saved_policy import load_policy

    start = (saved or {}).get("state", {}).get("warm_start", {})
    if init == NO_INIT:
        if start.get("method") == WARM_START_METHOD:
            raise PlacerError(f"the run in {str(out)!r} fine-tunes a policy; resume it without --init none")
        return
    if start.get("method") != WARM_START_METHOD:
        raise PlacerError(f"the run in {str(out)!r} trains from scratch, not from a policy; resume it without --init")
    was = start.get("policy", {})
    if (was.get("name"), was.get("version")) not in {(m.name, m.version) for m in load_policy(init).members}:
        raise PlacerError(f"the run in {str(out)!r} fine-tunes {was.get('name')} v{was.get('version')}, not "
                          f"--init {init!r}; resume it without --init")


def check_starts(args) -> None:
    """--starts K: a number of heuristic warm starts the trainer can race."""
    from placer.errors import PlacerError
    from placer.rl.config import MAX_STARTS

    if args.starts is None:
        return
    if not 1 <= args.starts <= MAX_STARTS:
        raise PlacerError(f"--starts must be 1 to {MAX_STARTS}, got {args.starts}")
    if args.starts == 1:
        return
    for given, flag in ((args.init not in (None, NO_INIT), "--init"), (args.warm_start == "none", "--warm-start none"),
                        (args.ray is not None, "--ray"), (args.reward == "measured", "--reward measured")):
        if given:
            raise PlacerError(f"--starts races heuristic warm starts in the simulator; it does not go with {flag}")


def kept_line(kept: dict, unit: float = 1.0) -> str:
    """One line saying which start a run kept and why, with the three step times (`placer.rl.starts.kept`)."""
    from placer.cli.output import human_seconds

    t = kept["step_times"]

    def shown(key: str) -> str:
        return "none" if t.get(key) is None else human_seconds(t[key], unit)

    heuristic = f"best heuristic ({kept['heuristic']}) {shown('heuristic')}" if kept.get("heuristic") else \
        f"best heuristic {shown('heuristic')}"
    return (f"kept {kept['kept']}: {kept['why']} (zero-shot {shown('zero_shot')}, {heuristic}, "
            f"trained {shown('trained')})")
