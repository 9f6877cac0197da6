"""Steering list schedulers with a policy's proposals: the per-op choices that placing groups cannot make.

A policy places groups of ops (64-128 per graph, `placer.grouping`). On a
graph of thousands of small ops spread over many GPUs, the list schedulers
(`heft`, `cpop`) win by choosing a device op by op, which a group-level
placement cannot do. Steering joins the two: d distinct placements of the
policy (its answer, then each pool member's fastest, then each one's second
fastest, and so on: one member's samples are much alike) propose, for every
op, the devices they put it on (at most d), and each scheduler's processor
selection (earliest finish time, insertion, routed transfers, live memory:
`placer.placers.heft.heft`, and `placer.placers.cpop.cpop`, whose critical
path keeps its one device) chooses one of those for each op. With one
proposal HEFT gives the policy's answer back; with every device offered it
would be HEFT. The answer is the fastest that fits of the policy's answer and
the steered schedules, one per scheduler and depth of `DEPTHS`.

The proposals carry what the policy learned: offering each op as many devices
drawn at random (its answer's device among them) gave slower schedules at
35 of 36 graph, cluster and depth tried for HEFT and 31 of 36 for CPOP
(`bench.bench_steering`, docs/experiments/world-model.md, "Steering a list
scheduler").
"""

from __future__ import annotations

import time

import numpy as np

from placer.cluster import Cluster
from placer.graph import OpGraph
from placer.placers.common import LiveMemory, Problem
from placer.placers.cpop import cpop
from placer.placers.heft import heft
from placer.placers.time_cap import Deadline
from placer.simulator import Simulator

DEPTHS = (4, 8, 16)
"""How many of the policy's distinct placements propose devices, one steered schedule per depth and scheduler.
Few proposals keep an op near where the policy put it; many leave the scheduler more room. All are tried, as no
one depth was best on every graph tried (docs/experiments/world-model.md, "Steering a list scheduler")."""
SCHEDULERS = {"heft": heft, "cpop": cpop}
"""The list schedulers steered: where the policy loses to a heuristic on the presets, it is mostly to these."""
STEER_SECONDS = 30.0
"""The most seconds all the steered schedules may take together; the one the limit cuts short is dropped, and
no more are made (each schedules about 10k ops a second here, in pure Python, on a routed preset)."""


def distinct(rows: list[np.ndarray], count: int) -> list[np.ndarray]:
    """The first `count` distinct arrays of `rows`, in order."""
    chosen: list[np.ndarray] = []
    for row in rows:
        if len(chosen) == count:
            break
        if not any(np.array_equal(row, c) for c in chosen):
            chosen.append(row)
    return chosen


def steer(graph: OpGraph, cluster: Cluster, sim: Simulator, ranked: list[np.ndarray], *,
          depths: tuple[int, ...] = DEPTHS, seconds: float = STEER_SECONDS) -> tuple[np.ndarray, dict]:
    """The fastest of ``ranked[0]`` (the policy's answer, device per op) and each of `SCHEDULERS` steered by
    the first d rows of `ranked` (distinct placements of the policy, `placer.rl.zero_shot.proposals`) for
    each d of `depths`.

    Returns ``(assignment, meta)``; meta holds the answer's step time, each schedule's (``"heft 8"``: step time,
    None when the time limit cut it short), the one chosen (None: the answer stood) and the seconds spent.
    """
    t0 = time.perf_counter()
    problem = Problem.build(graph, cluster)
    ops = np.arange(len(graph))
    answer = sim.run_batch(ranked[0][None])
    best, best_key = ranked[0], (bool(answer.oom[0]), float(answer.step_time[0]))
    deadline = Deadline(seconds)
    tried: dict[str, float | None] = {}
    chosen = None
    for depth in sorted({min(d, len(ranked)) for d in depths} - {0, 1}):  # one proposal is the answer itself
        offered = np.zeros((len(graph), len(cluster)), dtype=bool)
        for proposal in ranked[:depth]:
            offered[ops, proposal] = True
        for name, scheduler in SCHEDULERS.items():
            schedule = scheduler(problem, memory=LiveMemory(problem), deadline=deadline, offered=offered)
            if schedule.capped_ops:
                tried[f"{name} {depth}"] = None
                break
            res = sim.run_batch(schedule.assignment[None])
            key = (bool(res.oom[0]), float(res.step_time[0]))
            tried[f"{name} {depth}"] = key[1]
            if key < best_key:
                best, best_key, chosen = schedule.assignment, key, f"{name} {depth}"
        if deadline.hit:
            break
    return best, {"unsteered_step_time": float(answer.step_time[0]), "schedules": tried, "chosen": chosen,
                  "seconds": time.perf_counter() - t0}
