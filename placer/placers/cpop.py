"""`cpop`: Critical-Path-on-a-Processor (Topcuoglu, Hariri and Wu, IEEE TPDS 2002).

HEFT's companion in the same paper, for graphs whose critical path is most of
the work: spreading that path over devices only adds transfers to it, so
CPOP keeps it whole on one device and schedules everything else around it.

1. *Priorities*: ``priority(i) = rank_u(i) + rank_d(i)``, the length of the
   longest path through op i with mean compute and transfer costs (HEFT's
   upward rank, plus the downward rank ``rank_d(i) = max_{j in pred(i)}
   (rank_d(j) + w̄_j + c̄_ji)``; `placer.dag`). The critical path is walked from an entry op
   whose priority is the largest, ``|CP|``, through successors of priority
   ``|CP|``, to an exit op.
2. *The critical-path processor* is the device with the least total compute
   time for the path's ops.
3. *Scheduling*: ready ops are taken highest priority first (a priority
   queue, not HEFT's static list); an op of the path goes to the critical-path
   processor, any other to the device giving it the earliest finish time,
   with HEFT's insertion policy.

Additions for this project, as for `heft`: a colocation unit follows the
device of its first placed op, and a device without room for an op (by
`LiveMemory` along CPOP's own order) is not offered; a path op that does not
fit on the critical-path processor is placed like any other op.
"""

from __future__ import annotations

import heapq

import numpy as np

from placer.cluster import Cluster
from placer.dag import downward_ranks, upward_ranks
from placer.graph import OpGraph
from placer.placement import Placement
from placer.placers.common import LiveMemory, Problem
from placer.placers.heft import ListScheduler, Schedule, quantised_ranks
from placer.placers.registry import register
from placer.placers.time_cap import TIME_LIMIT_SECONDS, Deadline, TimeLimit


def critical_path(problem: Problem, priority: np.ndarray) -> np.ndarray:
    """Ops of the critical path, entry to exit: each step goes to the first successor (in topological order)
    whose priority equals ``|CP|``, the largest priority (compared after `quantised_ranks`' rounding)."""
    q = quantised_ranks(priority)
    top = q.max()
    p_off, _ = problem.graph.predecessors
    s_off, s_idx = problem.graph.successors
    topo_rank = problem.graph.topo_rank
    entries = [i for i in np.flatnonzero((q == top) & (np.diff(p_off) == 0))]
    if not entries:  # rounding broke the tie between an entry and its path: start from the heaviest op
        entries = [int(np.argmax(priority))]
    path = [int(min(entries, key=lambda i: topo_rank[i]))]
    while True:
        succ = s_idx[s_off[path[-1]]:s_off[path[-1] + 1]]
        succ = succ[q[succ] == top]
        if succ.size == 0:
            return np.asarray(path, dtype=np.int64)
        path.append(int(succ[np.argmin(topo_rank[succ])]))


def cpop(problem: Problem, devices: np.ndarray | None = None, memory: LiveMemory | None = None,
         deadline: Deadline | None = None, offered: np.ndarray | None = None) -> Schedule:
    """Run CPOP on a compiled problem.

    Parameters
    ----------
    problem : the graph and cluster as arrays.
    devices : devices CPOP may use (all of the cluster's by default).
    memory : live-memory account; devices without room for an op are skipped.
    deadline : past it, the ops left are placed by the time cap's quick rule
        (`placer.placers.time_cap`); None: no cap.
    offered : ``[num_ops, num_devices]`` bool, the devices of `devices` each op off the critical path may go
        to (every row with at least one of them); None: all of `devices`. The critical path keeps its device.

    Returns
    -------
    Schedule
        Device, start and finish per op; ``length`` is CPOP's makespan.
    """
    devs = np.arange(problem.num_devices) if devices is None else np.asarray(devices)
    memory = LiveMemory(problem) if memory is None else memory
    times = problem.times
    w, c = times[:, devs].mean(axis=1), problem.mean_comm_time(devs)
    priority = upward_ranks(problem.graph, w, c) + downward_ranks(problem.graph, w, c)
    path = critical_path(problem, priority)
    on_path = np.zeros(problem.num_ops, dtype=bool)
    on_path[path] = True
    path_device = int(devs[np.argmin(times[np.ix_(path, devs)].sum(axis=0))])

    p_off, _ = problem.graph.predecessors
    s_off, s_idx = problem.graph.successors
    key = quantised_ranks(priority)
    topo_rank = problem.graph.topo_rank
    waiting = np.diff(p_off).astype(np.int64)  # unscheduled predecessors of each op
    queue = [(-key[i], int(topo_rank[i]), int(i)) for i in np.flatnonzero(waiting == 0)]
    heapq.heapify(queue)
    scheduler = ListScheduler(problem, memory)
    while queue:
        if deadline is not None and deadline.passed():
            break
        _, _, i = heapq.heappop(queue)
        choices = scheduler.allowed(i, devs if offered is None or on_path[i] else devs[offered[i, devs]])
        scheduler.place(i, [path_device] if on_path[i] and path_device in choices else choices)
        for j in s_idx[s_off[i]:s_off[i + 1]].tolist():
            waiting[j] -= 1
            if waiting[j] == 0:
                heapq.heappush(queue, (-key[j], int(topo_rank[j]), j))
    return scheduler.schedule(devs, deadline, critical_path_ops=int(len(path)),
                              critical_path_device=problem.cluster.devices[path_device].name)


@register("cpop", description="Critical-Path-on-a-Processor (Topcuoglu et al. 2002): the critical path on one "
                              "device, other ops by earliest finish")
def place_cpop(graph: OpGraph, cluster: Cluster, *, time_limit: TimeLimit = TIME_LIMIT_SECONDS) -> Placement:
    """CPOP over every device of the cluster; see the module docstring. `time_limit`: the time cap
    (`placer.placers.time_cap`)."""
    deadline = Deadline(time_limit)
    problem = Problem.build(graph, cluster)
    memory = LiveMemory(problem)
    schedule = cpop(problem, memory=memory, deadline=deadline)
    return problem.placement(schedule.assignment, "cpop", memory, **schedule.meta())
