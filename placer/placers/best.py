"""The best heuristic placement: one rule for everyone who picks one.

A placement that fits in memory beats one that does not; then the lower cost
(simulated step time, or max load with the throughput objective) wins; a cost
that is missing or not finite counts as infinite; between equals the
candidate named first wins. `rank` is that rule; `ranked_heuristics` runs
the candidates (registered heuristics, and single devices named
``single_device:DEVICE``) and ranks them; `place_best` is method ``best``:
every candidate heuristic run, the winner returned as ``best:NAME``.
``placer place --method best``, the REST service's ``best``
(`service.placing`), ``placer compare``'s ``best`` row and its winners
(`placer.placers.comparison`), the trainer's warm start
(`placer.rl.trainer`) and pre-training's teachers (`placer.rl.pretrain`)
all pick by it.

Which heuristics compete (`candidates`): every registered one, whatever the
objective. A placer's ``objectives`` (`placer.placers.registry.register`)
name what it builds its placement for, and it is told the objective when
asked for one of those; but every placement is scored by the simulator on
the objective asked for, so one built for another objective competes like
the rest and may win (``pipeline_dp``, built for throughput, is the fastest
in step time on some graphs). ``placer place``, ``placer compare`` and the
service say so beside such a placement (`built_for_note`), and
``compare``'s winners, ``best``, the service's ``best`` and baselines and
the trainer's warm start and floor all rank the same set.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import replace
from typing import Callable, Mapping, NamedTuple, Sequence

import numpy as np

from placer.cluster import Cluster
from placer.errors import PlacerError
from placer.graph import OpGraph
from placer.placement import Placement, Provenance
from placer.placers import registry
from placer.placers.time_cap import TIME_LIMIT_OPTION, TIME_LIMIT_SECONDS

log = logging.getLogger("placer.best")

BEST = "best"
"""Method ``best``: not a registered placer but a choice among them (`place_best`)."""

SINGLE_DEVICE = "single_device:"
"""Prefix of the candidate that puts every op on one device (``single_device:GPU:0``)."""


class Candidate(NamedTuple):
    """One scored candidate placement."""

    name: str
    """A heuristic's name, or ``single_device:DEVICE``."""
    assignment: np.ndarray
    """Device index of each op ``[num_ops]``."""
    cost: float
    """Simulated step time (max load with the throughput objective), or as the caller's `score` says."""
    oom: bool
    """Whether it runs out of memory."""


def _finite(cost: float | None) -> float:
    return float(cost) if cost is not None and math.isfinite(cost) else math.inf


def rank(costs: Sequence[float | None], ooms: Sequence[bool]) -> list[int]:
    """Indices of candidates, best first: those that fit, then by cost (missing or non-finite last);
    equal candidates keep their order."""
    return sorted(range(len(costs)), key=lambda i: (bool(ooms[i]), _finite(costs[i])))


def single_devices(cluster: Cluster) -> list[str]:
    """The single-device candidates of `cluster`, in device order."""
    return [f"{SINGLE_DEVICE}{d.name}" for d in cluster.devices]


def ranked_heuristics(graph: OpGraph, cluster: Cluster, names: Sequence[str] | None = None, *,
                      objective: str = "step_time",
                      score: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None,
                      sim=None, seconds: float | None = None) -> list[Candidate]:
    """Run each candidate and rank them (`rank`): the best first.

    Each heuristic's step time and seconds are logged at INFO on ``placer.best`` as it finishes (a 100k-op
    graph takes minutes; `placer train` prints them).

    Parameters
    ----------
    names : candidates in tie-break order: registered heuristics and ``single_device:DEVICE``
        (`single_devices`); default every single device, then every registered heuristic.
        A heuristic that cannot place the graph (`PlacerError`) is left out.
    objective : passed to `registry.place` (a heuristic that optimises it receives it).
    score : ``score(assignments [K, num_ops]) -> (cost [K], oom [K])`` scores every candidate at once
        instead (e.g. max loads, or placements once projected onto groups); by default a heuristic's cost
        is the step time `registry.place` simulated, a single device's that of `sim` (a
        `placer.simulator.Simulator` of the graph and cluster, made when not given).
    seconds : the most the heuristics may take together (a training run's share of its budget): each that
        takes a ``time_limit`` (`placer.placers.time_cap`) gets what is left of `seconds`, shared evenly
        among those still to run, and never more than its own default cap; the others (linear, well under a
        second at 100k ops) run as they are. None: each heuristic keeps its own cap. One stopped by such a
        share is named `capped_name`, since its placement is not the heuristic's own.
    """
    if names is None:
        names = [*single_devices(cluster), *registry.names(heuristic_only=True)]
    t0 = time.perf_counter()
    capped = [n for n in names if not n.startswith(SINGLE_DEVICE) and TIME_LIMIT_OPTION in registry.get(n).options]
    device_index = {d.name: i for i, d in enumerate(cluster.devices)}
    placed: list[tuple[str, np.ndarray, float | None, bool | None]] = []
    for name in names:
        if name.startswith(SINGLE_DEVICE):
            placed.append((name, np.full(len(graph), device_index[name[len(SINGLE_DEVICE):]], dtype=np.int64),
                           None, None))
            continue
        options = {}
        if seconds is not None and name in capped:
            left = max(0.0, seconds - (time.perf_counter() - t0))
            still_to_run = len(capped) - capped.index(name)  # this one included
            options[TIME_LIMIT_OPTION] = min(TIME_LIMIT_SECONDS, left / still_to_run)
        try:
            p = registry.place(name, graph, cluster, objective=objective, **options)
        except PlacerError as e:
            log.info("%s: cannot place %r (%s)", name, graph.name, e)
            continue
        log.info("%s: %.3f ms%s, placed in %.1f s%s", name, p.step_time * 1e3, " (OOM)" if p.oom else "",
                 p.meta.get("place_seconds", 0.0),
                 f" (stopped by its {p.meta['time_limit']:.1f} s cap)" if p.meta.get("time_capped") else "")
        if options and options[TIME_LIMIT_OPTION] < TIME_LIMIT_SECONDS and p.meta.get("time_capped"):
            # stopped sooner than `place --method NAME` stops it: another placement than the heuristic's own
            name = capped_name(name, options[TIME_LIMIT_OPTION])
        placed.append((name, p.assignment(graph, cluster), p.step_time, p.oom))
    if score is not None:
        cost, oom = score(np.stack([a for _, a, _, _ in placed]))
        scored = [Candidate(n, a, float(c), bool(o)) for (n, a, _, _), c, o in zip(placed, cost, oom)]
    else:
        if sim is None and any(t is None for _, _, t, _ in placed):
            from placer.simulator import Simulator

            sim = Simulator(graph, cluster)
        scored = []
        for name, assignment, step_time, oom in placed:
            if step_time is None:
                r = sim.run(assignment)
                step_time, oom = r.step_time, r.oom
            scored.append(Candidate(name, assignment, float(step_time), bool(oom)))
    order = rank([c.cost for c in scored], [c.oom for c in scored])
    return [scored[i] for i in order]


def capped_name(name: str, seconds: float) -> str:
    """How a heuristic stopped by a cap shorter than its own is named among candidates (``pipeline_dp[capped
    1.5 s]``): what it placed then is not the placement ``place --method NAME`` gives."""
    return f"{name}[capped {seconds:.3g} s]"


def built_for_note(method: str, objective: str) -> str:
    """What is said beside a placement whose placer builds for another objective than `objective` (the
    placement's ``meta.ignored_objective``): that it was scored on `objective` like every other."""
    name = method.split(":")[-1]  # best:NAME
    built_for = " and ".join(registry.get(name).objectives) if name in registry.names() else "another objective"
    return f"({name} builds its placement for {built_for}; scored on {objective} like every placer, and a " \
           "candidate of best)"


def candidates(objective: str, names: Sequence[str] | None = None) -> list[str]:
    """The heuristics `place_best` and baselines run: every registered heuristic, whatever `objective`
    (see the module's docstring: each is scored on the objective asked for).

    Parameters
    ----------
    objective : the objective asked for (not a filter: kept so that callers say what they rank by).
    names : restrict to these (each must be a registered heuristic).

    Raises
    ------
    PlacerError
        If a name is not a registered heuristic (``rl`` trains: it is not a candidate), `names` is
        empty, or no heuristic is registered.
    """
    if names is not None:
        if not names:  # else best answered "no heuristic produced a placement: {}", baselines {}
            raise PlacerError("candidates is empty: name at least one heuristic, or leave it out for every one; "
                              f"heuristics: {', '.join(registry.names(heuristic_only=True))}")
        learned = [n for n in dict.fromkeys(names) if not registry.get(n).heuristic]
        if learned:
            raise PlacerError(f"candidates must be heuristics; {', '.join(map(repr, learned))} is learned "
                              f"(ask for it as the method); heuristics: "
                              f"{', '.join(registry.names(heuristic_only=True))}")
        return [registry.get(n).name for n in dict.fromkeys(names)]
    heuristics = registry.names(heuristic_only=True)
    if not heuristics:
        raise PlacerError("no heuristic placer is registered")
    return heuristics


def place_best(graph: OpGraph, cluster: Cluster, *, objective: str = "step_time",
               names: Sequence[str] | None = None, budget_seconds: float = math.inf,
               known: Mapping[str, Placement] | None = None) -> tuple[Placement, dict[str, float | None]]:
    """Method ``best``: every candidate heuristic (see `candidates`), the winner by `rank` returned
    (by step time; by max load with the throughput objective).

    Heuristics run one after another; once `budget_seconds` are spent the rest
    are skipped (``meta.skipped``), so one request cannot run for ever (the
    first always runs, and one that has started runs to its end).

    Parameters
    ----------
    known : placements already made of this graph and cluster for `objective`, by method; a candidate
        found here is taken as it is instead of placed again (``placer compare`` with ``all,best``).

    Returns
    -------
    (best, step_times) : the winner, its provenance chosen by `BEST` (so its
        contract ``method`` reads ``best:NAME``; ``meta.best_of`` lists the
        candidates), and each candidate's step time (None where it failed or
        was skipped).

    Raises
    ------
    PlacerError
        If no heuristic is registered or none produced a placement.
    """
    results, step_times, problems = run_candidates(candidates(objective, names), graph, cluster, objective,
                                                   budget_seconds, known)
    if not results:
        raise PlacerError(f"method 'best': no heuristic produced a placement: {problems}")
    cost = [p.max_load if objective == "throughput" else p.step_time for p in results]
    best = results[rank(cost, [p.oom for p in results])[0]]
    chosen = replace(best, provenance=Provenance(chosen_by=BEST), meta={**best.meta, "best_of": list(step_times),
                                                                          **problems})
    return chosen, step_times


def run_candidates(names: Sequence[str], graph: OpGraph, cluster: Cluster, objective: str,
                   budget_seconds: float = math.inf, known: Mapping[str, Placement] | None = None
                   ) -> tuple[list[Placement], dict[str, float | None], dict[str, dict[str, str]]]:
    """Run each placer in `names` (or take it from `known`) until `budget_seconds` are spent.

    Returns
    -------
    (placements, step_times, problems) : the placements made, in `names` order; each name's step time
        (None where it failed or was skipped); ``{"failed": {name: why}, "skipped": {name: why}}``, each
        key present only when not empty. One placer failing (even with a bug) is recorded, not fatal.
    """
    results: list[Placement] = []
    step_times: dict[str, float | None] = {}
    failed: dict[str, str] = {}
    skipped: dict[str, str] = {}
    t0 = time.monotonic()
    for k, name in enumerate(names):
        step_times[name] = None
        if known is not None and name in known:
            p = known[name]
        elif k > 0 and time.monotonic() - t0 > budget_seconds:  # the first always runs
            skipped[name] = f"not run: the {budget_seconds:g} s budget of this request was spent"
            continue
        else:
            try:
                p = registry.place(name, graph, cluster, objective=objective)
            except PlacerError as e:
                failed[name] = str(e)
                continue
            except Exception as e:  # a bug in one heuristic must not sink the others
                log.exception("placer %r failed on graph %r", name, graph.name)
                failed[name] = f"{type(e).__name__}: {e}"
                continue
        results.append(p)
        step_times[name] = p.step_time
    problems = {k: v for k, v in (("failed", failed), ("skipped", skipped)) if v}
    return results, step_times, problems
