"""Where a training run starts, and what it may never answer worse than.

A run is given placements before its first REINFORCE step: the best
heuristic (`ranked_heuristics`), and, when it fine-tunes a pre-trained
policy, that policy's zero-shot answer (best of K samples, as ``placer place
--method rl --policy shipped`` answers, `placer.rl.finetune`). Whatever its
budget, the run answers the fastest of those starts and of what training
found, in the simulator and on the run's objective: a short or unlucky run
must not hand back a placement slower than one it was given for free (on
unseen graphs a 60 s run from scratch ended 8% slower than the zero-shot
answer, issue #42). `kept` says which of the three it answered and why.

Each placement is a `Best` tagged with its ``source``: `ZERO_SHOT`,
``heuristic:NAME`` (`heuristic_source`) or `TRAINED` (a REINFORCE sample).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from placer.cluster import Cluster
from placer.graph import OpGraph
from placer.objectives import ThroughputModel
from placer.placement import Placement
from placer.placers import best
from placer.placers.best import Candidate
from placer.simulator import Simulator

ZERO_SHOT = "zero-shot"
"""Source of the pre-trained policy's zero-shot answer (or of its projection onto the run's groups)."""
TRAINED = "trained"
"""Source of a placement a REINFORCE step sampled."""
HEURISTIC = "heuristic:"
"""Prefix of a heuristic's source (``heuristic:heft``)."""


def heuristic_source(name: str) -> str:
    """The source of heuristic `name`'s placement (``heuristic:NAME``)."""
    return f"{HEURISTIC}{name}"


def throughput_cost(model: ThroughputModel, ops: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Max load ``[K]`` of placements of ops ``[K, N]``, whether some device's weights exceed its
    memory ``[K]``, and the worst such overflow (as a fraction of that memory) ``[K]``."""
    cost = model.max_load_batch(ops)
    held = np.zeros((len(ops), model.num_devices))
    np.add.at(held, (np.arange(len(ops))[:, None], ops), model.params[None, :])
    overflow = np.max(held / model.memory_bytes[None, :] - 1.0, axis=1)
    return cost, overflow > 0, overflow


HEURISTIC_SHARE = 0.5
"""The most of a run's budget its heuristic starts may take together: at 100k ops the capped list schedulers
would otherwise take minutes of a 60 s budget (`heuristic_limit_of`)."""


def heuristic_limit_of(budget_seconds: float | None) -> float | None:
    """Seconds a run of `budget_seconds` gives its heuristics (`placer.placers.best.ranked_heuristics`'s
    ``seconds``); None without a time budget (each heuristic keeps its own cap)."""
    return None if budget_seconds is None else HEURISTIC_SHARE * float(budget_seconds)


def ranked_heuristics(graph: OpGraph, cluster: Cluster, objective: str = "step_time", *,
                      sim: Simulator | None = None, throughput: ThroughputModel | None = None,
                      seconds: float | None = None) -> list[Candidate]:
    """Every single device and every registered heuristic, best first for `objective`
    (`placer.placers.best.ranked_heuristics`: those that fit first, then by cost, equals in that order).

    Returns ``(name, device per op, cost, oom)`` candidates; the cost is the simulated step time, or the max
    load with ``objective="throughput"``. `sim` and `throughput` reuse a caller's models; `seconds` bounds the
    heuristics' time together (`heuristic_limit_of`).
    """
    score = None
    if objective == "throughput":
        sim = sim or Simulator(graph, cluster)
        model = throughput if throughput is not None else ThroughputModel(graph, cluster, sim.times)

        def score(ops: np.ndarray):
            cost, over, _ = throughput_cost(model, ops)
            return cost, over
    return best.ranked_heuristics(graph, cluster, objective=objective, score=score, sim=sim, seconds=seconds)


def searched_reference(graph: OpGraph, cluster: Cluster, reference: tuple[str, np.ndarray, float],
                       seconds: float) -> tuple[str, np.ndarray, float]:
    """A warm start's ``(name, device per op, step time)`` after `seconds` of local search
    (`placer.placers.refine`), named by its provenance (``NAME+search``).

    Which basin REINFORCE ends in depends much on where it starts, so a
    searched start is an option, not the default (evidence:
    docs/learned-placer.md).
    """
    from placer.placers.refine import refine

    name, devices, _ = reference
    found = refine(graph, cluster, Placement.from_assignment(graph, cluster, devices, name), seconds=seconds)
    return found.provenance.lineage(found.method), found.assignment(graph, cluster), float(found.step_time)


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


WHAT = {ZERO_SHOT: "the zero-shot answer", "heuristic": "the best heuristic", TRAINED: "training's best sample"}


def kept(trainer) -> dict[str, Any]:
    """Which start a `placer.rl.trainer.Trainer` answers, why, and the three costs it chose among (None where
    the run had none).

    ``{"kept": "zero-shot" | "heuristic:NAME" | "trained", "why": str, "step_times": {"zero_shot",
    "heuristic", "trained"}, "heuristic": NAME | None, "objective"}``; with the throughput objective the
    "step times" are max loads. ``trained`` is the best placement a REINFORCE step sampled (the replayed
    best placement left out), whether or not the run answers it.
    """
    s = trainer.state
    returned = s.returned
    zero_shot = s.warm_start.get("start_step_time") if s.warm_start.get("method") == "policy" else None
    heuristic = trainer.reference
    times = {"zero_shot": zero_shot, "heuristic": None if heuristic is None else _finite(float(heuristic[2])),
             "trained": _finite(s.trained.step_time)}
    source = returned.source or (TRAINED if returned.step > 0 else
                                 ZERO_SHOT if zero_shot is not None else
                                 heuristic_source(heuristic[0]) if heuristic is not None else TRAINED)
    mine = "heuristic" if source.startswith(HEURISTIC) else source
    others = [WHAT[k] for k in (ZERO_SHOT, "heuristic", TRAINED)
              if k != mine and times[k.replace("-", "_")] is not None]
    if mine == TRAINED:
        why = "training found a placement faster than " + (" and ".join(others[:2]) or "its start")
    elif s.step == 0:
        why = f"{WHAT[mine]} is the fastest start, and no REINFORCE step has run"
    else:
        why = f"{WHAT[mine]} is no slower than " + " or ".join(others or ["anything training sampled"])
    return {"kept": source, "why": why, "step_times": times,
            "heuristic": None if heuristic is None else heuristic[0], "objective": trainer.config.objective}
