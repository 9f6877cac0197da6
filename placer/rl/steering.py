"""Steering list schedulers with a policy's proposals: the per-op choices that placing groups cannot make.

A policy places groups of ops (64-128 per graph, `placer.grouping`). On a
graph of thousands of small ops spread over many GPUs, the list schedulers
(`heft`, `cpop`) win by choosing a device op by op, which a group-level
placement cannot do. Steering joins the two: d distinct placements of the
policy (its answer, then each pool member's first, then each one's second,
and so on: one member's samples are much alike; a member's placements in
`placer.rl.zero_shot.proposals`' order) propose, for every
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
from placer.simulator import Simulator

DEPTHS = (4, 8, 16)
"""How many of the policy's distinct placements propose devices, one steered schedule per depth and scheduler.
Few proposals keep an op near where the policy put it; many leave the scheduler more room. All are tried, as no
one depth was best on every graph tried (docs/experiments/world-model.md, "Steering a list scheduler")."""
SCHEDULERS = {"heft": heft, "cpop": cpop}
"""The list schedulers steered: where the policy loses to a heuristic on the presets, it is mostly to these."""
MAX_STEERED_OPS = 25_000
"""Graphs of more ops are not steered: each schedule takes some 20 us per op here (a routed preset,
`placer.placers.routed_slots`), so six of them on 25k ops take some 3 s. A size, not a time limit, so that the
answer never depends on the machine's speed or load."""


def steers(steer: bool | None) -> bool:
    """Whether the policy's answer is steered, zero-shot and as a fine-tune's start: as `steer` says, and when
    not told (None) always. The answer is never slower for it, and its six schedules cost some 1.6 s at 12.6k
    ops here; False is for an answer that must be the policy's own placement."""
    return steer is not False


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
          depths: tuple[int, ...] = DEPTHS) -> tuple[np.ndarray, dict]:
    """The fastest of ``ranked[0]`` (the policy's answer, device per op) and each of `SCHEDULERS` steered by
    the first d rows of `ranked` (distinct placements of the policy, `placer.rl.zero_shot.proposals`) for
    each d of `depths`; the answer alone on graphs of more than `MAX_STEERED_OPS` ops, or from one proposal.

    Returns ``(assignment, meta)``; meta holds the answer's step time, each schedule's (``"heft 8"``: step
    time), the one chosen (None: the answer stood), the seconds spent, and why nothing was steered if so.
    """
    t0 = time.perf_counter()
    answer = sim.run_batch(ranked[0][None])
    best, best_key = ranked[0], (bool(answer.oom[0]), float(answer.step_time[0]))
    meta: dict = {"unsteered_step_time": best_key[1], "schedules": {}, "chosen": None}
    steered_depths = depths_of(depths, len(ranked))
    if len(graph) > MAX_STEERED_OPS:
        meta["not_steered"] = f"more than {MAX_STEERED_OPS:,} ops"
    elif not steered_depths:
        meta["not_steered"] = "the policy proposed one distinct placement, nothing to choose among"
    else:
        problem = Problem.build(graph, cluster)
        for depth in steered_depths:
            offered = offered_by(ranked[:depth], len(cluster))
            for name, scheduler in SCHEDULERS.items():
                schedule = scheduler(problem, memory=LiveMemory(problem), offered=offered)
                res = sim.run_batch(schedule.assignment[None])
                key = (bool(res.oom[0]), float(res.step_time[0]))
                meta["schedules"][f"{name} {depth}"] = key[1]
                if key < best_key:
                    best, best_key, meta["chosen"] = schedule.assignment, key, f"{name} {depth}"
    meta["seconds"] = time.perf_counter() - t0
    return best, meta


def depths_of(depths: tuple[int, ...], proposals: int) -> list[int]:
    """The depths to steer at with this many proposals: each at most that, and more than one (one proposal is
    the answer itself)."""
    return sorted({min(d, proposals) for d in depths} - {0, 1})


def offered_by(proposals: list[np.ndarray], num_devices: int) -> np.ndarray:
    """``[num_ops, num_devices]``: the devices any of `proposals` (device per op) puts each op on."""
    offered = np.zeros((len(proposals[0]), num_devices), dtype=bool)
    for proposal in proposals:
        offered[np.arange(len(proposal)), proposal] = True
    return offered
