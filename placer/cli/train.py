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
import json

from placer.cli.common import (EXIT_INTERRUPTED, WARM_STARTS, StopOnSignal, add_graph_and_cluster, add_grouping_flags,
                               add_json_flag, add_objective, add_refine_sweeps, add_run_folder, check_at_least,
                               check_budget, check_refine, claim_run_folder, config_help, run_folder)
from placer.cli.output import IMITATION_NOTE_SECONDS, ProgressLine, heuristics_shown, seconds_per_unit
from placer.cli.train_start import (DEFAULT_INIT, NO_INIT, check_starts, given_config, kept_line,
                                    policy_to_fine_tune, saved_run, scratch_only)

CHECKPOINT_EVERY_SECONDS = 30.0
DEFAULT_BUDGET_SECONDS = 600.0
DEFAULT_RAY_WORKERS = 2


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
    session = _Session(args, out, budget, graph, cluster, saved, raced, policy)
    return session.run()


def imitated_heuristic(warm_start: dict) -> dict | None:
    """The heuristic warm start a run imitated (its own, or a fine-tune's), if any."""
    if warm_start.get("method") == "heuristic":
        return warm_start
    return warm_start.get("imitated")


class _Session:
    """One invocation of `placer train`: set up or resume, loop, write the files."""

    def __init__(self, args, out, budget, graph, cluster, saved: dict | None, raced: dict | None, policy=None):
        self.args, self.out, self.budget = args, out, budget
        self.graph, self.cluster = graph, cluster
        self.unit = seconds_per_unit(graph)  # seconds per time unit, for printing
        self.saved, self.raced = saved, raced  # checked by `_saved_run`
        self.policy = policy  # with --init on a new run: the SavedPolicy to fine-tune
        self.stop = StopOnSignal()
        self.trainer = None  # a Trainer, or a Race (placer.rl.race) with --starts K
        self.last = None  # the latest StepStats
        self.best_written = False  # best_placement.json holds this run's best

    @property
    def racing(self) -> bool:
        from placer.rl.race import Race

        return isinstance(self.trainer, Race)

    # -- set-up ----------------------------------------------------------------
    def _scorer(self):
        """What makes the trainer's scorer from its simulator (`placer.rl.trainer.Trainer`'s ``scorer``):
        None for the simulator itself; with --reward measured, step times timed in TensorFlow; with --ray,
        on Ray workers."""
        args = self.args
        measured, ray = getattr(args, "reward", "simulated") == "measured", getattr(args, "ray", None)
        if not measured and not ray:
            return None

        def scorer(sim):
            if measured:
                from placer.measure.reward import MeasuredSimulator

                sim = MeasuredSimulator(sim)
            if ray:
                from placer.measure.distributed import RaySimulator

                sim = RaySimulator(sim, ray, DEFAULT_RAY_WORKERS if args.ray_workers is None else args.ray_workers)
            return sim

        return scorer

    def _make_trainer(self):
        from placer.errors import PlacerError
        from placer.rl import checkpoint
        from placer.rl.race import restore_race
        from placer.rl.config import XLA_MIN_BUDGET_SECONDS
        from placer.rl.starts import heuristic_limit_of
        from placer.rl.trainer import TrainConfig, Trainer

        args, graph, cluster, saved = self.args, self.graph, self.cluster, self.saved
        given = given_config(args)
        scorer = self._scorer()
        if self.budget is not None and self.budget < XLA_MIN_BUDGET_SECONDS:
            given["jit"] = False  # (`placer.rl.config.XLA_MIN_BUDGET_SECONDS` says why)
        if self.raced is not None:
            if scorer is not None:
                raise PlacerError(f"the run in {str(self.out)!r} races heuristic warm starts in the simulator; it "
                                  "does not go with --ray or --reward measured")
            return restore_race(graph, cluster, self.out, self.raced), True
        limit = heuristic_limit_of(self.budget)
        starts = getattr(args, "starts", None)
        if saved is None and starts is not None and starts > 1:
            return self._new_race(graph, cluster, TrainConfig(**given), starts, limit), False
        if saved is None:  # nothing saved yet (new run, or stopped before its first checkpoint): start fresh
            if self.policy is not None:
                from placer.rl.finetune import fine_tuner
                from placer.rl.steering import steers

                heuristic = given.pop("warm_start", "none") == "heuristic"
                return fine_tuner(graph, cluster, self.policy, TrainConfig(**given), heuristic=heuristic,
                                  groups=given.get("groups"), scorer=scorer, heuristic_limit=limit,
                                  steer=steers(args.steer)), False
            return Trainer(graph, cluster, TrainConfig(**given), scorer=scorer, heuristic_limit=limit), False
        from placer.rl.finetune import WARM_START_METHOD, FineTuner

        fine_tuning = saved.get("state", {}).get("warm_start", {}).get("method") == WARM_START_METHOD
        trainer = (FineTuner if fine_tuning else Trainer)(graph, cluster, checkpoint.config_of(saved),
                                                          reference=checkpoint.reference_of(saved), scorer=scorer)
        checkpoint.restore(trainer, self.out, saved)
        return trainer, True

    def _new_race(self, graph, cluster, config, count: int, heuristic_limit: float | None):
        """A race of the `count` fastest distinct heuristics; where they all agree, a run from that one."""
        import sys

        from placer.rl.race import Race, race_or_trainer

        trainer = race_or_trainer(graph, cluster, config, count, heuristic_limit)
        if not isinstance(trainer, Race):
            print(f"note: the heuristics place {graph.name!r} on {cluster.name!r} all alike; training from "
                  f"{trainer.reference[0]} alone", file=sys.stderr)
        return trainer

    # -- the run -----------------------------------------------------------------
    def run(self) -> int:
        import sys

        self.out.mkdir(parents=True, exist_ok=True)
        self.lock = claim_run_folder(self.out, "training run")
        with self.stop:
            try:
                with heuristics_shown():
                    self.trainer, resumed = self._make_trainer()
                self._write_best()  # the start's placement: a job has a result before its first checkpoint
                self._write_progress("running")
                reason = self._loop(resumed)
            except BaseException as e:
                self._stopped_by(e, save=True)
                raise
        try:
            self._finish(reason)
        except BaseException as e:  # outside the signal handler's block: Ctrl-C lands here at once
            self._stopped_by(e)
            raise
        if reason == "interrupted":
            print(f"placer train: interrupted at step {self.trainer.state.step}; checkpoint saved in "
                  f"{str(self.out)!r} (continue with --resume)", file=sys.stderr)
            return EXIT_INTERRUPTED
        return 0

    def _stopped_by(self, error: BaseException, save: bool = False) -> None:
        """Say in progress.json how the run stopped: "interrupted" by Ctrl-C (after a checkpoint, with `save`),
        else "failed" with the error. Best effort: a full disk that stopped the run may refuse this too."""
        import contextlib

        from placer.errors import PlacerError, interrupted

        with contextlib.suppress(OSError):
            if interrupted(error):
                if save:
                    self._save()
                self._write_progress("interrupted")
            else:
                self._write_progress("failed", error=str(error) if isinstance(error, PlacerError)
                                     else f"{type(error).__name__}: {error}")

    def _loop(self, resumed: bool) -> str:
        from placer.rl import race
        from placer.rl.run_folder import HISTORY_FILE, Cadence, History
        from placer.rl.trainer import PENDING_IMITATION, StepStats

        trainer = self.trainer
        history = History(self.out / HISTORY_FILE, StepStats.FIELDS, keep_until=trainer.state.step if resumed else 0)
        bar = ProgressLine(self.args.steps, self.budget, self.unit)
        pending = trainer.state.warm_start.get(PENDING_IMITATION)
        if self.racing:
            bar.note(f"racing {len(trainer.arms)} warm starts: "
                     + ", ".join(f"{a.reference[0]} {_ms(a.reference[2], self.unit)}" for a in trainer.arms))
        elif pending == "start":
            bar.note("warm start: imitating the policy's zero-shot answer...")
        elif pending == "heuristic" or (not trainer.state.warm_start and trainer.config.warm_start == "heuristic"):
            bar.note(f"warm start: imitating the best heuristic ({trainer.reference[0]})...")
        checkpoints = Cadence(CHECKPOINT_EVERY_SECONDS)
        imitation_notes = Cadence(IMITATION_NOTE_SECONDS)

        def on_imitation(steps: int, probability: float, seconds: float, limit: float | None) -> None:
            from placer.rl.trainer import IMITATION_TARGET

            if steps == 1 or imitation_notes.due() or probability > IMITATION_TARGET:
                bar.note(f"  imitation step {steps}: per-group probability {probability:.3f} (stops at "
                         f"{IMITATION_TARGET:g}), {seconds:.1f} s" + (f" of at most {limit:.1f}" if limit else ""))
                imitation_notes.done()

        def on_step(stats) -> None:
            self.last = stats
            history.append({k: getattr(stats, k) for k in StepStats.FIELDS})
            if not self.best_written:  # a cold start's first step: the job's first result
                self._write_best()
            self._write_progress("running")
            bar.show(stats)
            if checkpoints.due():
                self._save()
                checkpoints.done()

        try:
            return race.run(trainer, budget_seconds=self.budget, max_steps=self.args.steps, on_step=on_step,
                            should_stop=lambda: self.stop.requested, on_imitation=on_imitation)
        finally:
            bar.close()
            history.close()

    # -- files -------------------------------------------------------------------
    def _save(self) -> None:
        """Checkpoint plus the best placement so far (when training has scored one)."""
        from placer.rl import checkpoint

        if self.trainer is None:
            return
        if self.racing:  # each start's checkpoint, then race_state.json
            self.trainer.save(self.out)
        else:
            checkpoint.save(self.trainer, self.out)
        self._write_best()

    def _write_best(self) -> None:
        """``best_placement.json``: the best placement so far (when the run has scored one)."""
        from placer.placement import save_placement
        from placer.rl.run_folder import BEST_FILE

        if self.trainer is not None and self.trainer.state.returned.group_devices:  # the floor counts (a heuristic)
            save_placement(self.trainer.best_placement(), self.out / BEST_FILE)
            self.best_written = True

    def _finish(self, reason: str) -> None:
        from placer.cli.output import plural, print_json, race_line
        from placer.rl import run_folder

        self._save()
        kept = self._write_result(reason)
        refined = self._refine() if reason == "done" else None
        self._write_progress("done" if reason == "done" else "interrupted")
        self._plot()
        if self.args.json:
            t = self.trainer
            best = t.best_placement() if t.state.returned.group_devices else None
            print_json({
                "state": "done" if reason == "done" else "interrupted",
                "graph": t.graph.name, "cluster": t.cluster.name, "step": t.state.step,
                "samples": t.state.samples, "elapsed_seconds": t.state.elapsed_seconds,
                "best_step_time": best.step_time if best else None, "oom": best.oom if best else None,
                "objective": t.config.objective, "max_load": best.max_load if best else None,
                "lower_bound": t.sim.lower_bound, "warm_start": t.state.warm_start, "kept": kept,
                "groups": t.grouping.num_groups, "out": str(self.out),
                "refined_step_time": refined.step_time if refined else None,
                "files": {name: str(self.out / name) for name in run_folder.written_files(self.racing)},
            })
        elif self.trainer.state.returned.group_devices:
            b = self.trainer.state.returned
            imitated = imitated_heuristic(self.trainer.state.warm_start)
            unit = self.unit
            heur = (f"; best heuristic {imitated['heuristic']} {_ms(imitated['heuristic_step_time'], unit)}"
                    if imitated else "")
            print(f"{self.trainer.graph.name} on {self.trainer.cluster.name}: best step time {_ms(b.step_time, unit)}"
                  f"{' (OUT OF MEMORY)' if b.oom else ''} after {plural(self.trainer.state.step, 'step')}, "
                  f"{plural(self.trainer.state.samples, 'sample')}, {self.trainer.state.elapsed_seconds:.1f} s "
                  f"(lower bound {_ms(self.trainer.sim.lower_bound, unit)}{heur})")
            if kept:
                print(kept_line(kept, unit))
            race = self.trainer.state.warm_start.get("race")
            if race:
                print(race_line(race, unit))
            print(f"wrote {self.out / run_folder.BEST_FILE}, {run_folder.RESULT_FILE}, {run_folder.HISTORY_FILE}, "
                  f"{run_folder.CURVE_FILE}")
            if refined:
                r = refined.meta["refined"]
                print(f"refined by local search: {_ms(refined.step_time, unit)} ({r['moves']} group move(s), "
                      f"{r['seconds']:.1f} s); wrote {self.out / 'refined_placement.json'}")

    def _write_result(self, reason: str) -> dict | None:
        """result.json: which start the run kept and why (`placer.rl.starts.kept`), its state, steps and best
        step time; returns the kept report (None before any placement was scored)."""
        from placer.fileio import write_atomic
        from placer.rl.run_folder import RESULT_FILE

        t = self.trainer
        if not t.state.returned.group_devices:
            return None
        best = t.best_placement()
        kept = best.meta.get("kept")
        result = {"state": "done" if reason == "done" else "interrupted", "step": t.state.step,
                  "elapsed_seconds": t.state.elapsed_seconds, "step_time": best.step_time, "oom": best.oom,
                  **(kept or {})}
        write_atomic(self.out / RESULT_FILE, json.dumps(result, indent=1).encode())
        return kept

    def _refine(self):
        """With --refine-seconds: the best placement after local search, written to refined_placement.json."""
        from placer.placement import save_placement
        from placer.placers.refine import refine
        from placer.rl.run_folder import REFINED_FILE

        t = self.trainer
        if self.args.refine_seconds is None or not t.state.returned.group_devices:
            return None
        refined = refine(t.graph, t.cluster, t.best_placement(), seconds=self.args.refine_seconds,
                         max_sweeps=self.args.refine_sweeps)
        save_placement(refined, self.out / REFINED_FILE)
        return refined

    def _plot(self) -> None:
        """curve.png from history.csv."""
        from placer.rl.run_folder import CURVE_FILE, HISTORY_FILE, plot_training_curve

        t = self.trainer
        imitated = imitated_heuristic(t.state.warm_start)
        throughput = getattr(t, "throughput", None) is not None
        plot_training_curve(self.out / HISTORY_FILE, self.out / CURVE_FILE,
                            title=f"{t.graph.name} on {t.cluster.name}",
                            bound=t.throughput_bound if throughput else t.sim.lower_bound, throughput=throughput,
                            heuristic=(imitated["heuristic"], imitated["heuristic_step_time"]) if imitated else None)

    def _write_progress(self, state: str, error: str | None = None) -> None:
        import math

        from placer.rl.run_folder import read_progress, write_progress

        t = self.trainer
        s = t.state if t is not None else None
        best = s.returned.step_time if s is not None and math.isfinite(s.returned.step_time) else None
        last = {"mean_reward": self.last.mean_reward, "entropy": self.last.entropy} if self.last else None
        if last is None and s is not None and s.step > 0:  # resumed, no step yet: the figures of the step it is at
            before = read_progress(self.out) or {}
            last = {k: before.get(k) for k in ("mean_reward", "entropy")} if before.get("step") == s.step else None
        data = {
            "state": state,
            "step": s.step if s else 0,
            "samples": s.samples if s else 0,
            "elapsed_seconds": s.elapsed_seconds if s else 0.0,
            "budget_seconds": self.budget,
            "best_step_time": best,
            "mean_reward": last["mean_reward"] if last else None,
            "entropy": last["entropy"] if last else None,
            "error": error,
        }
        write_progress(self.out, data)


def _ms(seconds: float, unit: float = 1.0) -> str:
    from placer.cli.output import human_seconds

    return human_seconds(seconds, unit)
