"""One ``placer train`` run (`placer.cli.train`, which checks the command): set up or resume, loop, and write
the run folder's files, whose names and contents `placer.cli.train`'s docstring gives."""

from __future__ import annotations

import json

from placer.cli.common import EXIT_INTERRUPTED, StopOnSignal, claim_run_folder
from placer.cli.output import IMITATION_NOTE_SECONDS, ProgressLine, heuristics_shown, seconds_per_unit
from placer.cli.train_start import given_config, kept_line

CHECKPOINT_EVERY_SECONDS = 30.0
DEFAULT_RAY_WORKERS = 2


def imitated_heuristic(warm_start: dict) -> dict | None:
    """The heuristic warm start a run imitated (its own, or a fine-tune's), if any."""
    if warm_start.get("method") == "heuristic":
        return warm_start
    return warm_start.get("imitated")


class TrainSession:
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
