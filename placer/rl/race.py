"""Train from several heuristic warm starts at once, keeping the better half each round (successive halving).

Where REINFORCE starts decides much of where it ends: runs from different
heuristics' placements of one graph end in different basins, and the best is
often not the run from the fastest heuristic (docs/learned-placer.md, "Where
training starts"). A race gives every start a short run, drops the slower
half by the best step time each has found, and repeats until one start has
the rest of the budget (Jamieson and Talwalkar 2016, "Non-stochastic best arm
identification and hyperparameter optimization").

Each start is an ordinary `Trainer` with its own op groups (shaped by its
heuristic), policy and checkpoint; `save` and `restore` keep them in
``DIR/starts/N/`` beside ``race_state.json``, so a race resumes where it stopped.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from placer.cluster import Cluster
from placer.errors import PlacerError
from placer.graph import OpGraph
from placer.fileio import write_atomic
from placer.placement import Placement
from placer.rl import checkpoint
from placer.rl.config import MAX_STARTS
from placer.rl.run_folder import RACE_STATE_FILE
from placer.rl.starts import ranked_heuristics, searched_reference
from placer.rl.state import StepStats, TrainerState, config_from_saved
from placer.rl.trainer import TrainConfig, Trainer, train

STARTS_DIR = "starts"
FORMAT = 1


def race_starts(graph: OpGraph, cluster: Cluster, count: int, config: TrainConfig,
                heuristic_limit: float | None = None) -> list[tuple[str, np.ndarray, float]]:
    """The `count` fastest distinct heuristic placements, as warm starts ``(name, device per op, cost)``.

    Placements that score exactly alike (one device or another of identical
    ones) count once. With ``config.warm_start_search`` each start is first
    improved by that much local search. The heuristics take at most `heuristic_limit` seconds together
    (`placer.rl.starts.heuristic_limit_of`).
    """
    starts: list[tuple[str, np.ndarray, float]] = []
    seen: set[tuple[bool, float]] = set()
    for name, devices, cost, oom in ranked_heuristics(graph, cluster, config.objective, seconds=heuristic_limit):
        if (oom, cost) in seen:
            continue
        seen.add((oom, cost))
        starts.append((name, devices, cost))
        if len(starts) == count:
            break
    if config.warm_start_search > 0:
        starts = [searched_reference(graph, cluster, s, config.warm_start_search) for s in starts]
    return starts


def race_or_trainer(graph: OpGraph, cluster: Cluster, config: TrainConfig, count: int,
                    heuristic_limit: float | None = None) -> Race | Trainer:
    """A race of the `count` fastest distinct heuristics, or, where they all place alike, a `Trainer` from that one.

    Finding the starts counts against the budget either way.
    """
    t0 = time.perf_counter()
    starts = race_starts(graph, cluster, count, config, heuristic_limit)
    seconds = time.perf_counter() - t0
    if len(starts) > 1:
        return Race(graph, cluster, config, starts, heuristic_seconds=seconds)
    trainer = Trainer(graph, cluster, config, reference=starts[0])
    trainer.setup_seconds += seconds
    return trainer


def run(trainer: Race | Trainer, **kwargs) -> str:
    """Train a race or a single `Trainer` alike (the arguments of `train`)."""
    return trainer.run(**kwargs) if isinstance(trainer, Race) else train(trainer, **kwargs)


def halving_schedule(starts: int, total: float) -> list[tuple[int, float]]:
    """Rounds of successive halving: ``(starts still running, each one's cumulative budget)``.

    Every round gets an equal share of `total` (seconds or steps), split
    evenly among the starts still running; after each round the better half
    goes on (at least one), and the last round is one start's alone.
    """
    sizes = []
    n = starts
    while n > 1:
        sizes.append(n)
        n //= 2
    sizes.append(1)
    share = total / len(sizes)
    rounds, cumulative = [], 0.0
    for n in sizes:
        cumulative += share / n
        rounds.append((n, cumulative))
    return rounds


class Race:
    """REINFORCE from several warm starts, by successive halving; looks like one `Trainer` to its caller.

    Parameters
    ----------
    graph, cluster, config : as for `Trainer` (``config.warm_start`` must be "heuristic").
    starts : ``(name, device per op, cost)`` of each warm start, fastest first (`race_starts`).
    heuristic_seconds : time spent finding the starts; it counts against the budget.
    """

    def __init__(self, graph: OpGraph, cluster: Cluster, config: TrainConfig,
                 starts: list[tuple[str, np.ndarray, float]], heuristic_seconds: float = 0.0):
        if config.warm_start != "heuristic":
            raise PlacerError("a race starts from heuristic warm starts; this config has warm_start "
                              f"{config.warm_start!r}")
        if not 2 <= len(starts) <= MAX_STARTS:
            raise PlacerError(f"a race needs 2 to {MAX_STARTS} distinct starts, got {len(starts)}")
        self.graph, self.cluster, self.config = graph, cluster, config
        self.arms = [Trainer(graph, cluster, config, reference=s) for s in starts]
        self.heuristic_seconds = heuristic_seconds
        self.alive = list(range(len(self.arms)))
        self.round = 0
        self.dropped_in: dict[int, int] = {}
        """Start index -> the round after which it was dropped."""

    # -- looking like a Trainer to `placer train` -------------------------------------
    @property
    def sim(self):
        return self.arms[0].sim

    @property
    def throughput(self):
        return self.arms[0].throughput

    @property
    def throughput_bound(self):
        return self.arms[0].throughput_bound

    @property
    def grouping(self):
        return self._leader().grouping

    @property
    def state(self) -> TrainerState:
        """The whole race's totals (steps, samples, seconds), and the best placement any start found."""
        leader = self._leader()
        return TrainerState(
            step=sum(a.state.step for a in self.arms), samples=sum(a.state.samples for a in self.arms),
            elapsed_seconds=self.heuristic_seconds + sum(a.state.elapsed_seconds for a in self.arms),
            baseline=None, best=replace(leader.state.returned),
            warm_start={**self.arms[0].state.warm_start, "race": self.summary()})

    def _leader(self) -> Trainer:
        return min(self.arms, key=lambda a: (a.state.returned.oom, a.state.returned.step_time))

    def summary(self) -> dict[str, Any]:
        """Per start: where it began, what it found, how long it ran, and when it was dropped."""
        return {"round": self.round, "starts": [{
            "heuristic": a.reference[0], "heuristic_step_time": float(a.reference[2]),
            "best_step_time": a.state.returned.step_time if a.state.returned.group_devices else None,
            "steps": a.state.step, "elapsed_seconds": a.state.elapsed_seconds,
            "dropped_after_round": self.dropped_in.get(i)} for i, a in enumerate(self.arms)]}

    def best_placement(self) -> Placement:
        """The fastest placement any start found, with the race in ``meta["race"]``."""
        placement = self._leader().best_placement()
        placement.meta["race"] = self.summary()
        return placement

    # -- running ---------------------------------------------------------------------
    def run(self, *, budget_seconds: float | None = None, max_steps: int | None = None,
            on_step: Callable[[StepStats], None] | None = None,
            should_stop: Callable[[], bool] = lambda: False, on_imitation: Callable | None = None) -> str:
        """Race until the budget (seconds) or step count of the whole race is spent, as `train` does.

        The rounds split the steps when a step count is given (a budget given
        too then caps the race's seconds in all), else the seconds.
        Returns ``"done"`` or ``"interrupted"``.
        """
        if budget_seconds is None and max_steps is None:
            raise PlacerError("give a time budget or a number of steps")
        by_seconds = max_steps is None
        total = (budget_seconds - self.heuristic_seconds) if by_seconds else float(max_steps)
        rounds = halving_schedule(len(self.arms), max(total, 0.0))

        def relay(stats: StepStats) -> None:
            if on_step is None:
                return
            s = self.state
            on_step(replace(stats, step=s.step, samples=s.samples, elapsed_seconds=s.elapsed_seconds,
                            best_step_time=s.best.step_time))

        while True:
            _, target = rounds[self.round]
            last = self.round == len(rounds) - 1
            for i in list(self.alive):
                arm = self.arms[i]
                left = None if max_steps is None else max_steps - self.state.step
                if left is not None and left <= 0:
                    return "done"
                # what the whole race has left, in this start's own clock (budgets may change on resume)
                seconds_left = (None if budget_seconds is None
                                else arm.state.elapsed_seconds + budget_seconds - self.state.elapsed_seconds)
                if by_seconds:
                    until = seconds_left if last else target  # the one start left has the rest
                    if arm.state.elapsed_seconds >= until and arm.state.step > 0:
                        continue
                    reason = train(arm, budget_seconds=until, on_step=relay, should_stop=should_stop,
                                   on_imitation=on_imitation)
                else:
                    if seconds_left is not None and seconds_left <= arm.state.elapsed_seconds:
                        return "done"
                    goal = arm.state.step + left if last else min(max(1, math.floor(target)), arm.state.step + left)
                    if arm.state.step >= goal:
                        continue
                    reason = train(arm, max_steps=goal, budget_seconds=seconds_left, on_step=relay,
                                   should_stop=should_stop, on_imitation=on_imitation)
                if reason == "interrupted":
                    return "interrupted"
            if last:
                return "done"
            keep = rounds[self.round + 1][0]
            ranked = sorted(self.alive, key=lambda i: (self.arms[i].state.returned.oom,
                                                       self.arms[i].state.returned.step_time))
            for i in ranked[keep:]:
                self.dropped_in[i] = self.round
            self.alive = sorted(ranked[:keep])
            self.round += 1

    # -- saving ----------------------------------------------------------------------
    def save(self, directory: str | Path) -> Path:
        """Checkpoint every start in ``DIR/starts/N/``, then the race's own state (written last)."""
        directory = Path(directory)
        for i, arm in enumerate(self.arms):
            checkpoint.save(arm, directory / STARTS_DIR / str(i))
        state = {"format": FORMAT, "graph": self.graph.name, "cluster": self.cluster.name,
                 "num_ops": len(self.graph), "graph_fingerprint": self.graph.fingerprint,
                 "num_devices": len(self.cluster), "cluster_fingerprint": self.cluster.fingerprint,
                 "starts": len(self.arms), "alive": self.alive, "round": self.round,
                 "dropped_in": {str(k): v for k, v in self.dropped_in.items()},
                 "heuristic_seconds": self.heuristic_seconds, "config": asdict(self.config)}
        path = directory / RACE_STATE_FILE
        write_atomic(path, json.dumps(state, indent=1).encode())
        return path


def load_race_state(directory: str | Path) -> dict[str, Any] | None:
    """The saved state of the race in `directory`, or None when there is none."""
    return checkpoint.read_state_file(Path(directory) / RACE_STATE_FILE, "race state", FORMAT)


def check_resumable(saved: dict[str, Any], graph: OpGraph, cluster: Cluster, directory: str | Path) -> None:
    """A PlacerError unless the race saved as `saved` in `directory` places `graph` on `cluster`.

    Each start's own state is checked too, since races saved before the race
    state kept op counts and fingerprints have them only there.
    """
    directory = Path(directory)
    checkpoint.check_same_problem(saved, graph, cluster, directory, "race")
    for i in range(saved.get("starts", 0)):
        arm_state = checkpoint.load_state(directory / STARTS_DIR / str(i))
        if arm_state is not None:
            checkpoint.check_same_problem(arm_state, graph, cluster, directory, "race")


def restore_race(graph: OpGraph, cluster: Cluster, directory: str | Path, saved: dict[str, Any]) -> Race:
    """The race saved in `directory`, every start with its own groups, weights and state."""
    directory = Path(directory)
    check_resumable(saved, graph, cluster, directory)
    config = config_from_saved(saved["config"])
    starts = []
    for i in range(saved["starts"]):
        arm_state = checkpoint.load_state(directory / STARTS_DIR / str(i))
        reference = None if arm_state is None else checkpoint.reference_of(arm_state)
        if reference is None:
            raise PlacerError(f"cannot resume the race in {str(directory)!r}: start {i} has no saved state")
        starts.append((arm_state, reference))
    race = Race(graph, cluster, config, [ref for _, ref in starts], saved["heuristic_seconds"])
    for i, (arm_state, _) in enumerate(starts):
        checkpoint.restore(race.arms[i], directory / STARTS_DIR / str(i), arm_state)
    race.alive = [int(i) for i in saved["alive"]]
    race.round = int(saved["round"])
    race.dropped_in = {int(k): int(v) for k, v in saved.get("dropped_in", {}).items()}
    return race

