"""Refining any placement by local search in the simulator: move whole groups while it gets faster.

A placer's answer is rarely a local optimum of the simulated step time: a
policy's best sample or a heuristic's split often gets faster when one group
of ops moves to another device. `refine` tries every such move at once (one
batched simulation per sweep: every group to every other device), keeps the
best, and also tries the best few improving moves of different groups applied
together (one small batch more), so a sweep may take several moves. It stops
at a local optimum, after `max_sweeps`, or when the next sweep would not fit
in `seconds`. From a local optimum with time left it goes on with groups
half the size (coarse to fine, as METIS refines while uncoarsening).

Groups are the learned placer's (`placer.grouping`: colocation sets never
split, heavy edges kept inside), so every refined placement honours
colocation, and a policy's placement is refined in the units it chose.
Out-of-memory placements are refined towards fitting first: candidates are
ranked by the bytes over capacity, then by step time.

With `worlds` (`refine`'s default `WORLDS`), a move must also pay off when
the model's numbers are off: one that is faster in the nominal world is
then judged in worlds drawn around it (`placer.placers.robustness.random_world`:
op costs, bandwidths, latencies, GPU speed), by its worst step time relative
to the start's in each, and taken only if that worst gets lower. A search
in the nominal world alone finds moves that time transfers against compute
to the microsecond; they lose their gain, and more, as soon as a GPU is
faster or a link slower than modelled (docs/experiments/world-model.md,
"Local search in drawn worlds").
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from placer.cluster import Cluster
from placer.errors import PlacerError
from placer.graph import OpGraph
from placer.placement import Placement
from placer.simulator import Simulator

DEFAULT_GROUPS = 128
"""The shipped policy's G: a zero-shot placement is refined in the groups it was made of."""
COMBINED_MOVES = 8
"""The most improving moves of different groups tried together after a sweep."""
REFINER = "search"
"""How a placement's `placer.placement.Provenance` names this search once it has refined it."""
WORLDS = 4
"""Worlds drawn around the nominal one in which `refine` judges a move that pays off in the nominal one
(0: the nominal world alone)."""
WORLD_SIGMA = 0.35
"""Sigma of the lognormal factors of those worlds (`placer.placers.robustness.random_world`)."""
WORLD_SEED = 20_451
"""Seeds those worlds: the same input gives the same search on any machine, and they are not the
robustness report's worlds (`placer.placers.robustness.perturbed_worlds`), which judge the result."""
CHUNK_ENTRIES = 16_000_000
"""Placements x ops simulated in one batch (128 MB of device indices): a fine level of a big graph has
thousands of moves."""


@dataclass(frozen=True)
class Refinement:
    """What a local search did.

    Attributes
    ----------
    assignment : ``[num_ops]`` device per op, the best found.
    step_time, overflow_bytes : its simulated step time (nominal world) and bytes over capacity (0 when it fits).
    start_step_time : the start's step time.
    moves : group moves taken; sweeps : neighbourhoods simulated.
    local_optimum : the last sweep found no improving move (False: stopped by time or `max_sweeps`).
    seconds : wall time spent; last_sweep_seconds : the last sweep's share of it.
    """

    assignment: np.ndarray
    step_time: float
    overflow_bytes: float
    start_step_time: float
    moves: int
    sweeps: int
    local_optimum: bool
    seconds: float
    last_sweep_seconds: float


def descend(sim: Simulator, group_of_op: np.ndarray, start: np.ndarray, *, seconds: float,
            max_sweeps: int | None = None, worlds: list[Simulator] = ()) -> Refinement:
    """Steepest descent over moves of one group to one device, from `start` (device per op).

    Parameters
    ----------
    sim : the compiled simulator of the graph and cluster.
    group_of_op : ``[num_ops]`` group per op; a move sets every op of a group to one device.
    start : ``[num_ops]`` device per op to start from.
    seconds : wall-time budget; the first sweep always runs, a later one only
        if the previous sweep's time still fits.
    max_sweeps : stop after this many sweeps (repeatable results, whatever the machine's speed).
    worlds : simulators of the same graph and cluster in other worlds; with them a move faster in `sim`'s
        is also judged by its worst step time over the start's across `sim` and these (`_Judge`).
    """
    if not seconds > 0:
        raise PlacerError(f"refine: seconds must be positive, got {seconds!r}")
    if max_sweeps is not None and max_sweeps < 1:
        raise PlacerError(f"refine: max_sweeps must be at least 1, got {max_sweeps!r}")
    t0 = time.perf_counter()
    num_devices = len(sim.cluster)
    order = np.argsort(group_of_op, kind="stable")
    members = np.split(order, np.cumsum(np.bincount(group_of_op))[:-1])
    cur = np.array(start, dtype=np.int64)
    judge = _Judge(sim, list(worlds), cur)
    cur_key = judge.start_key
    start_step = cur_key[2]
    moves = sweeps = 0
    at_optimum = False
    last_sweep = 0.0
    while (max_sweeps is None or sweeps < max_sweeps) and (
            sweeps == 0 or time.perf_counter() - t0 + last_sweep <= seconds):
        s0 = time.perf_counter()
        groups, devices = _real_moves(cur, members, num_devices)
        keys = _move_keys(judge, cur, cur_key, members, groups, devices)
        sweeps += 1
        last_sweep = time.perf_counter() - s0
        better = np.flatnonzero(_less(keys, cur_key, relative=not judge.worlds))
        if len(better) == 0:
            at_optimum = True
            break
        ranked = better[np.lexsort((keys[better, 1], keys[better, 0]))]
        picked = _first_per_group(ranked, groups)[:COMBINED_MOVES]
        combos = np.repeat(cur[None], len(picked), axis=0)  # row m: the best m + 1 moves together
        for m, k in enumerate(picked):
            combos[m:, members[groups[k]]] = devices[k]
        combo_keys = (np.concatenate([keys[picked[:1]], judge(combos[1:], than=cur_key)]) if len(picked) > 1
                      else keys[picked])
        j = int(np.lexsort((combo_keys[:, 1], combo_keys[:, 0]))[0])
        cur, cur_key = combos[j].copy(), combo_keys[j]
        moves += j + 1
    return Refinement(cur, float(cur_key[2]), float(cur_key[0]), float(start_step), moves, sweeps, at_optimum,
                      time.perf_counter() - t0, last_sweep)


def refine(graph: OpGraph, cluster: Cluster, placement: Placement, *, seconds: float,
           groups: int = DEFAULT_GROUPS, max_sweeps: int | None = None, worlds: int = WORLDS) -> Placement:
    """`placement` improved by `descend`, coarse to fine, over the learned placer's groupings of `graph`.

    Starts with `groups` groups; at a local optimum with time left (at least
    twice the last sweep, since a finer sweep has twice the moves) it goes on
    with twice as many groups, as METIS refines while uncoarsening, until
    the groups cannot be split further. A move faster in the nominal world is
    also judged in `worlds` worlds drawn around it (`WORLD_SIGMA`,
    `WORLD_SEED`; 0: the nominal world alone), by its worst step time over
    the start's there (`_Judge`).

    Returns a new, simulated placement with the same method and meta, plus
    ``meta["refined"]``: the start's step time, moves, sweeps, whether the
    finest level reached a local optimum, the groups of each level and the
    seconds spent; its provenance adds `REFINER`. Never slower than the start
    (one that fits stays fitting).

    Raises
    ------
    PlacerError
        On a non-positive `seconds` or `max_sweeps`, a negative `worlds`, or bad `groups`.
    PlacementError
        If `placement` does not place every op of `graph` on `cluster`.

    Examples
    --------
    >>> from placer import presets
    >>> from placer.placers import registry
    >>> from placer.synthetic import layered_graph
    >>> g, c = layered_graph(300), presets.get("2gpu")
    >>> start = registry.place("round_robin", g, c)
    >>> better = refine(g, c, start, seconds=1.0, max_sweeps=3)
    >>> better.step_time <= start.step_time
    True
    """
    from placer.grouping import group_graph_fitting

    if not seconds > 0:
        raise PlacerError(f"refine: seconds must be positive, got {seconds!r}")
    if max_sweeps is not None and max_sweeps < 1:
        raise PlacerError(f"refine: max_sweeps must be at least 1, got {max_sweeps!r}")
    if isinstance(worlds, bool) or not isinstance(worlds, int) or worlds < 0:
        raise PlacerError(f"refine: worlds must be a non-negative integer, got {worlds!r}")
    t0 = time.perf_counter()
    sim = Simulator(graph, cluster)
    assignment = placement.assignment(graph, cluster)
    drawn = drawn_worlds(graph, cluster, sim.times, worlds)
    levels: list[Refinement] = []
    level_groups: list[int] = []
    asked = groups
    units = int(graph.colocation_ids.max()) + 1 if len(graph) else 0  # the most groups there can be
    while True:
        grouping = group_graph_fitting(graph, cluster, asked, sim.times)  # more where tensors forbid so few
        asked = max(asked, grouping.num_groups)
        left = seconds - (time.perf_counter() - t0)
        found = descend(sim, grouping.group_of_op, assignment, seconds=max(left, 1e-9),
                        max_sweeps=None if max_sweeps is None else max_sweeps - sum(f.sweeps for f in levels),
                        worlds=drawn)
        levels.append(found)
        level_groups.append(grouping.num_groups)
        assignment = found.assignment
        left = seconds - (time.perf_counter() - t0)
        if (not found.local_optimum or grouping.num_groups < asked or grouping.num_groups == units
                or left < 2 * found.last_sweep_seconds
                or (max_sweeps is not None and sum(f.sweeps for f in levels) >= max_sweeps)):
            break
        asked *= 2
    refined = sim.evaluate(Placement.from_assignment(graph, cluster, assignment, placement.method))
    return replace(refined, objective=placement.objective, provenance=placement.provenance.refined(REFINER),
                   meta={**placement.meta, "refined": {
        "start_step_time": levels[0].start_step_time, "moves": sum(f.moves for f in levels),
        "sweeps": sum(f.sweeps for f in levels), "local_optimum": levels[-1].local_optimum,
        "groups": level_groups, "worlds": worlds, "seconds": time.perf_counter() - t0,
    }})


def drawn_worlds(graph: OpGraph, cluster: Cluster, times: np.ndarray, n: int) -> list[Simulator]:
    """Simulators of `n` worlds drawn around the nominal one (`WORLD_SIGMA`, seeded by `WORLD_SEED`)."""
    from placer.placers.robustness import random_world

    rng = np.random.default_rng(WORLD_SEED)
    drawn = [random_world(graph, cluster, times, rng, WORLD_SIGMA) for _ in range(n)]
    return [Simulator(w.graph, w.cluster, times=w.times) for w in drawn]


class _Judge:
    """Keys ``[K, 3]`` of K assignments, lower first: bytes over capacity summed over devices, then the score,
    then the nominal step time.

    In the nominal world alone the score is the step time. With other worlds it is the largest, over the
    nominal world and those, of log(step time / the start's step time there), so the search ranks moves by
    their worst world (the start's score is 0). Only the assignments better than `than` (the current key)
    in the nominal world (fewer bytes over, or as few and faster) are simulated in the others; the rest
    score +inf and are never taken. So a move must pay off in the nominal world and lower the worst, and a
    sweep costs one nominal simulation per move plus the other worlds' of the few that pay off."""

    def __init__(self, sim: Simulator, worlds: list[Simulator], start: np.ndarray):
        self.sim, self.worlds = sim, worlds
        over, nominal = self._nominal(start[None])
        tiny = np.finfo(np.float64).tiny  # an empty graph's step takes no time
        self.log_base = np.log(np.maximum(self._worlds(start[None], nominal)[0], tiny)) if worlds else None
        self.start_key = np.array([over[0], 0.0 if worlds else nominal[0], nominal[0]])

    def _nominal(self, assignments: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Bytes over capacity summed over devices, and step times, in the nominal world."""
        res = self.sim.run_batch(assignments)
        return np.clip(res.peak_memory - self.sim.memory_bytes[None, :], 0.0, None).sum(axis=1), res.step_time

    def _worlds(self, assignments: np.ndarray, nominal: np.ndarray) -> np.ndarray:
        """``[K, 1 + len(worlds)]`` step times, the nominal world's (given) first."""
        return np.stack([nominal] + [w.run_batch(assignments).step_time for w in self.worlds], axis=1)

    def __call__(self, assignments: np.ndarray, than: np.ndarray) -> np.ndarray:
        over, nominal = self._nominal(assignments)
        if not self.worlds:
            return np.stack([over, nominal, nominal], axis=1)
        judged = _less(np.stack([over, nominal], axis=1), np.array([than[0], than[2]]), relative=True)
        score = np.full(len(assignments), np.inf)
        if judged.any():
            steps = self._worlds(assignments[judged], nominal[judged])
            score[judged] = (np.log(np.maximum(steps, np.finfo(np.float64).tiny)) - self.log_base).max(axis=1)
        return np.stack([over, score, nominal], axis=1)


def _move_keys(judge: _Judge, cur: np.ndarray, cur_key: np.ndarray, members: list[np.ndarray], groups: np.ndarray,
               devices: np.ndarray) -> np.ndarray:
    """`judge`'s keys (against `cur_key`) of `cur` with each (group, device) move applied, simulated in chunks of
    bounded memory."""
    keys = np.empty((len(groups), 3))
    chunk = max(1, CHUNK_ENTRIES // max(len(cur), 1))
    for lo in range(0, len(groups), chunk):
        hi = min(lo + chunk, len(groups))
        cands = np.repeat(cur[None], hi - lo, axis=0)
        for k in range(lo, hi):
            cands[k - lo, members[groups[k]]] = devices[k]
        keys[lo:hi] = judge(cands, than=cur_key)
    return keys


def _less(keys: np.ndarray, than: np.ndarray, relative: bool) -> np.ndarray:
    """Rows of `keys` strictly better than `than`: fewer bytes over, or as few and a lower score beyond rounding
    (by 1e-9 of it where the score is a step time, `relative`; by 1e-9 where it is a log ratio)."""
    over, score = keys[:, 0], keys[:, 1]
    fewer = over < than[0] * (1 - 1e-12) - 1e-6
    bar = than[1] * (1 - 1e-9) if relative else than[1] - 1e-9
    return fewer | ((over <= than[0]) & (score < bar))


def _real_moves(cur: np.ndarray, members: list[np.ndarray], num_devices: int) -> tuple[np.ndarray, np.ndarray]:
    """(group, device) pairs that change `cur`: every group to every device not already holding all of it."""
    groups, devices = [], []
    for g, ops in enumerate(members):
        held = cur[ops]
        for d in range(num_devices):
            if len(ops) and not (held == d).all():
                groups.append(g)
                devices.append(d)
    return np.array(groups, dtype=np.int64), np.array(devices, dtype=np.int64)


def _first_per_group(ranked: np.ndarray, groups: np.ndarray) -> list[int]:
    """The best move of each group, in rank order (moves of one group cannot be combined)."""
    seen: set[int] = set()
    picked = []
    for k in ranked:
        g = int(groups[k])
        if g not in seen:
            seen.add(g)
            picked.append(int(k))
    return picked
