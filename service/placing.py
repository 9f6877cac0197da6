"""Run placement methods for the service: one by name, or ``best`` of all heuristics.

Everything here goes through `placer.placers.registry.place`, which has the
simulator score each result, so the methods compared are judged alike. The
service adds no placement logic: it picks among the registry's answers.
"""

from __future__ import annotations

import inspect
import logging
import math
from typing import Any

from placer import presets
from placer.cluster import Cluster
from placer.errors import PlacerError
from placer.graph import OpGraph
from placer.placement import Placement
from placer.placers import registry

log = logging.getLogger("placer.service")

BEST = "best"
RL = "rl"


def resolve_cluster(spec: str | dict[str, Any]) -> Cluster:
    """A preset by name or an inline spec; never a file path (requests must not read server files).

    Raises
    ------
    ClusterError
        If the preset is unknown or the spec is malformed.
    """
    if isinstance(spec, str):
        return presets.get(spec)
    return Cluster.from_dict(spec)


def check_options(name: str, options: dict[str, Any]) -> None:
    """Refuse options the placer's function does not take, naming them.

    Raises
    ------
    PlacerError
        If an option is not a keyword parameter of the placer.
    """
    if not options:
        return
    params = inspect.signature(registry.get(name).fn).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return
    known = {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)} - {"graph", "cluster"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise PlacerError(f"method {name!r} takes no option(s) {unknown}; its options: {sorted(known) or 'none'}")


def place_one(name: str, graph: OpGraph, cluster: Cluster, *, objective: str = "step_time",
              options: dict[str, Any] | None = None) -> Placement:
    """Run one registered placer with user options; a bad option value is a user error.

    Raises
    ------
    PlacerError
        Unknown method or objective, unknown option, or an option value the
        placer rejects with TypeError/ValueError.
    """
    options = options or {}
    check_options(name, options)
    if not options:
        return registry.place(name, graph, cluster, objective=objective)
    try:
        return registry.place(name, graph, cluster, objective=objective, **options)
    except (TypeError, ValueError) as e:
        raise PlacerError(f"method {name!r}: bad option value ({e})") from None


def place_best(graph: OpGraph, cluster: Cluster, *, objective: str = "step_time") -> tuple[Placement, dict[str, float | None]]:
    """Every heuristic, the fastest placement that fits in memory returned.

    Returns
    -------
    (best, step_times) : the winner (``meta.best_of`` lists the candidates)
        and each heuristic's step time (None where it failed).

    Raises
    ------
    PlacerError
        If no heuristic is registered or none produced a placement.
    """
    names = registry.names(heuristic_only=True)
    if not names:
        raise PlacerError("method 'best': no heuristic placer is registered")
    results, step_times, errors = _run_all(names, graph, cluster, objective)
    if not results:
        raise PlacerError(f"method 'best': every heuristic failed: {errors}")
    best = min(results, key=lambda p: (p.oom, _finite(p.step_time)))
    best.meta["best_of"] = list(step_times)
    if errors:
        best.meta["failed"] = errors
    return best, step_times


def baselines(graph: OpGraph, cluster: Cluster, *, objective: str = "step_time",
              skip: str | None = None, known: Placement | None = None) -> dict[str, float | None]:
    """Step time of every heuristic (`known` reused for the method `skip`)."""
    names = [n for n in registry.names(heuristic_only=True) if n != skip]
    _, step_times, _ = _run_all(names, graph, cluster, objective)
    if skip is not None and known is not None and skip in registry.names(heuristic_only=True):
        step_times = {skip: known.step_time, **step_times}
    return step_times


def _run_all(names: list[str], graph: OpGraph, cluster: Cluster, objective: str
             ) -> tuple[list[Placement], dict[str, float | None], dict[str, str]]:
    """Run each placer; one failing (even with a bug) is recorded, not fatal."""
    results: list[Placement] = []
    step_times: dict[str, float | None] = {}
    errors: dict[str, str] = {}
    for name in names:
        try:
            p = registry.place(name, graph, cluster, objective=objective)
        except PlacerError as e:
            errors[name], step_times[name] = str(e), None
            continue
        except Exception as e:  # a bug in one heuristic must not sink the others
            log.exception("placer %r failed on graph %r", name, graph.name)
            errors[name], step_times[name] = f"{type(e).__name__}: {e}", None
            continue
        results.append(p)
        step_times[name] = p.step_time
    return results, step_times, errors


def _finite(x: float | None) -> float:
    return x if x is not None and math.isfinite(x) else math.inf
