"""`heft`: Heterogeneous Earliest Finish Time (Topcuoglu, Hariri and Wu, IEEE TPDS 2002).

Two phases, as in the paper:

1. *Task prioritising*: the upward rank of op i is
   ``rank_u(i) = w̄_i + max_{j in succ(i)} (c̄_ij + rank_u(j))``, with w̄_i the
   mean compute time of i over the devices and c̄_ij the mean cost of
   sending i's output (mean latency + bytes / mean bandwidth)
   (`placer.dag.upward_ranks`). Ops are taken
   in decreasing rank (ties: topological order, which keeps the list a valid
   topological order).
2. *Processor selection*: each op goes to the device that gives it the
   earliest finish time, with the *insertion* policy: it may run in an idle
   gap between two ops already scheduled there, if the gap is long enough
   and its data has arrived.

HEFT is for heterogeneous devices, so it uses every device of the cluster,
CPU included. Additions for this project: a colocation unit is pinned to the
device of its first placed op, and a device without room for an op (by
`LiveMemory` along HEFT's own order) is not offered (see
`placer.placers.common`). Communication: on a flat cluster, as in the
paper, contention-free (each pair has its own link there, and the
simulator's serialising of it is left to the simulator's step time, which
can be longer than HEFT's own schedule length, ``meta["schedule_length"]``);
on a topology, where a GPU's port or a switch's uplink carries the
transfers of many pairs, as the simulator makes transfers
(`placer.placers.routes.Transfers`): each follows its route, starts when
every link direction on it is free, and an output crosses to a device once.
HEFT places ops out of time order (by rank, into idle gaps), so it also
books a transfer into the earliest idle gap of every link direction on its
route (`placer.placers.routes.GapBook`), as it inserts ops on devices;
queueing it behind transfers planned earlier but happening later would
overstate every gap-filling op's input time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from placer.cluster import Cluster
from placer.dag import upward_ranks
from placer.graph import OpGraph
from placer.placement import Placement
from placer.placers.common import LiveMemory, Problem
from placer.placers.registry import register
from placer.placers.routed_slots import RoutedSlots
from placer.placers.routes import Transfers, earliest_slot
from placer.placers.time_cap import TIME_LIMIT_SECONDS, Deadline, TimeLimit, capped_meta, place_rest


@dataclass
class Schedule:
    """A placer's own schedule: device, start and finish of each op (graph order).

    Ops placed by the time cap's quick rule (`placer.placers.time_cap`) have
    no start or finish (NaN), and `capped_ops` counts them.
    """

    assignment: np.ndarray
    start: np.ndarray
    finish: np.ndarray
    notes: dict = field(default_factory=dict)
    """What else the placer reports in the placement's ``meta``."""
    capped_ops: int = 0

    @property
    def length(self) -> float:
        """The makespan of the ops the scheduler placed itself."""
        done = self.finish[~np.isnan(self.finish)]
        return float(done.max()) if done.size else 0.0

    def meta(self) -> dict:
        """The placement's ``meta`` from this schedule: ``schedule_length`` (only when the scheduler placed
        every op) and `notes`."""
        return {**({} if self.capped_ops else {"schedule_length": self.length}), **self.notes}


def priority_order(problem: Problem, rank: np.ndarray) -> np.ndarray:
    """Ops by decreasing rank; near-equal ranks (1e-9 relative) in topological order.

    Sums of float means differ in the last bits for ranks that are equal on
    paper (n3 and n4 of the paper's example both have rank 80), so ranks are
    compared after rounding.
    """
    return np.lexsort((problem.graph.topo_rank, -quantised_ranks(rank)))


def quantised_ranks(rank: np.ndarray) -> np.ndarray:
    """Ranks rounded to 1e-9 of the largest, so that ranks equal on paper compare equal."""
    scale = float(rank.max()) if rank.size and rank.max() > 0 else 1.0
    return np.round(rank / scale * 1e9)


class ListScheduler:
    """The processor-selection phase HEFT and CPOP share: ops placed one at a time, each at its earliest
    finish time among the devices offered (insertion policy), colocation units pinned to the device of their
    first placed op, and `LiveMemory` kept along the way. On a topology, transfers are booked on their routes'
    link directions (`Transfers`); on a flat cluster they are contention-free (see the module docstring)."""

    compiled = True
    """On a topology, place with `RoutedSlots` (the same schedule, compiled); False: the plain-Python
    reference path, which the tests compare it with."""

    def __init__(self, problem: Problem, memory: LiveMemory):
        n, D = problem.num_ops, problem.num_devices
        self.problem, self.memory = problem, memory
        self.assignment = np.full(n, -1, dtype=np.int64)
        self.start, self.finish = np.zeros(n), np.full(n, np.nan)  # NaN: not placed yet
        self.pinned = np.full(problem.num_units, -1, dtype=np.int64)
        self.starts: list[list[float]] = [[] for _ in range(D)]
        self.ends: list[list[float]] = [[] for _ in range(D)]
        self.p_off, self.p_idx = problem.graph.predecessors
        self.transfers = self.routed_slots = None
        if problem.routed and self.compiled:
            self.routed_slots = RoutedSlots(problem, self.assignment, self.start, self.finish)
        elif problem.routed:
            self.transfers = Transfers(problem, self.assignment, self.finish, gaps=True)

    def allowed(self, i: int, devs: np.ndarray) -> list[int]:
        """Where op i may go: its unit's device once pinned, else the devices of `devs` with room for it
        (the one with the most room when none has enough)."""
        u = int(self.problem.unit[i])
        if self.pinned[u] >= 0:
            return [int(self.pinned[u])]
        room = self.memory.room()[devs]
        need = self.memory.need(i, u, pinned=False)
        return devs[room >= need].tolist() or [int(devs[np.argmax(room)])]

    def place(self, i: int, choices: list[int]) -> int:
        """Put op i on the device of `choices` where it finishes first; returns that device."""
        problem = self.problem
        d = self.routed_slots.place(i, choices) if self.routed_slots is not None else self._place(i, choices)
        u = int(problem.unit[i])
        new_unit = None
        if self.pinned[u] < 0:
            self.pinned[u] = d
            new_unit = u
        self.memory.place(i, d, new_unit, self.assignment)
        return d

    def _place(self, i: int, choices: list[int]) -> int:
        """`place`'s choice of device in Python: on a flat cluster, and the reference on a topology."""
        problem = self.problem
        ready = np.zeros(problem.num_devices)
        if self.transfers is None:
            for m in self.p_idx[self.p_off[i]:self.p_off[i + 1]].tolist():
                np.maximum(ready, self.finish[m] + problem.comm_times(m, int(self.assignment[m])), out=ready)
        else:
            for d in choices:
                ready[d] = self.transfers.ready_time(i, d)[0]
        best = None
        for d in choices:
            dur = float(problem.times[i, d])
            t, k = earliest_slot(self.starts[d], self.ends[d], float(ready[d]), dur)
            if best is None or t + dur < best[0] + best[1]:
                best = (t, dur, d, k)
        t, dur, d, k = best
        if self.transfers is not None:
            self.transfers.ready_time(i, d, commit=True)
        if dur > 0:  # a zero-length op occupies no time, so it never blocks a gap
            self.starts[d].insert(k, t)
            self.ends[d].insert(k, t + dur)
        self.assignment[i], self.start[i], self.finish[i] = d, t, t + dur
        return d

    def schedule(self, devs: np.ndarray, deadline: Deadline | None = None, **notes) -> Schedule:
        """The schedule, after the time cap's quick rule has placed the ops left (if any)."""
        capped = place_rest(self.problem, self.memory, self.assignment, self.pinned, devs)
        if capped:
            rest = np.isnan(self.finish)
            self.start[rest] = np.nan
            notes.update(capped_meta(deadline, capped))
        return Schedule(self.assignment, self.start, self.finish, notes, capped)


def heft(problem: Problem, devices: np.ndarray | None = None,
         memory: LiveMemory | None = None, deadline: Deadline | None = None,
         offered: np.ndarray | None = None) -> Schedule:
    """Run HEFT on a compiled problem.

    Parameters
    ----------
    problem : the graph and cluster as arrays.
    devices : devices HEFT may use (all of the cluster's by default).
    memory : live-memory account; devices without room for an op are skipped
        (a fresh account of the device capacities by default).
    deadline : past it, the ops left are placed by the time cap's quick rule
        (`placer.placers.time_cap`); None: no cap.
    offered : ``[num_ops, num_devices]`` bool, the devices of `devices` each op may go to (every row with at
        least one of them); None: all of `devices` for every op. Ranks stay those over all of `devices`.

    Returns
    -------
    Schedule
        Device, start and finish per op; ``length`` is HEFT's makespan.
    """
    devs = np.arange(problem.num_devices) if devices is None else np.asarray(devices)
    scheduler = ListScheduler(problem, LiveMemory(problem) if memory is None else memory)
    rank = upward_ranks(problem.graph, problem.times[:, devs].mean(axis=1), problem.mean_comm_time(devs))
    for i in priority_order(problem, rank).tolist():
        if deadline is not None and deadline.passed():
            break
        scheduler.place(i, scheduler.allowed(i, devs if offered is None else devs[offered[i, devs]]))
    return scheduler.schedule(devs, deadline)


@register("heft", description="Heterogeneous Earliest Finish Time (Topcuoglu et al. 2002), insertion-based")
def place_heft(graph: OpGraph, cluster: Cluster, *, time_limit: TimeLimit = TIME_LIMIT_SECONDS) -> Placement:
    """HEFT over every device of the cluster; see the module docstring. `time_limit`: the time cap
    (`placer.placers.time_cap`)."""
    deadline = Deadline(time_limit)
    problem = Problem.build(graph, cluster)
    memory = LiveMemory(problem)
    schedule = heft(problem, memory=memory, deadline=deadline)
    return problem.placement(schedule.assignment, "heft", memory, **schedule.meta())
