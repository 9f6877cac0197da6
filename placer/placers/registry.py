"""The placer registry: every placement method, heuristic or learned, by name.

A placer is a function ``(graph, cluster, **options) -> Placement`` that fills
``devices``. `place` runs one, times it, and has the simulator score the
result, so every method is judged the same way.

The registry is filled by the modules that register placers, never by
importing them itself: Python runs ``placer/placers/__init__.py``, which
imports every heuristic, before this module, so the heuristics are always
registered; method ``rl`` is registered by ``placer.rl`` (`placer.rl.method`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from placer.cluster import Cluster
from placer.errors import PlacerError
from placer.graph import OpGraph
from placer.placement import Placement

PlacerFn = Callable[..., Placement]


@dataclass(frozen=True)
class PlacerInfo:
    """A registered placer.

    Attributes
    ----------
    name : the method name users give (``--method``, ``"method"``).
    fn : ``(graph, cluster, **options) -> Placement``.
    description : one line for `placer place --help` and ``GET /v1/placers``.
    heuristic : part of the ``all`` set (fast, no training).
    objectives : objectives the placer optimises; for others it still places,
        and says it ignored the objective.
    options : the keyword options it takes, each with one line saying what it
        does and its default (``GET /v1/placers`` lists them; anything else is
        refused by `placer.placers.common.reject_options`).
    """

    name: str
    fn: PlacerFn
    description: str
    heuristic: bool = True
    objectives: tuple[str, ...] = ("step_time",)
    options: dict[str, str] = field(default_factory=dict)


_REGISTRY: dict[str, PlacerInfo] = {}


def register(name: str, *, description: str, heuristic: bool = True, objectives: tuple[str, ...] = ("step_time",),
             options: dict[str, str] | None = None) -> Callable[[PlacerFn], PlacerFn]:
    """Decorator: register `fn` under `name`."""

    def wrap(fn: PlacerFn) -> PlacerFn:
        if name in _REGISTRY and _REGISTRY[name].fn is not fn:
            raise ValueError(f"placer {name!r} registered twice")
        _REGISTRY[name] = PlacerInfo(name, fn, description, heuristic, objectives, dict(options or {}))
        return fn

    return wrap


def get(name: str) -> PlacerInfo:
    """The placer called `name`.

    Raises
    ------
    PlacerError
        If no placer has that name (the message lists the names).
    """
    try:
        return _REGISTRY[name]
    except KeyError:
        raise PlacerError(f"unknown method {name!r}; methods: {', '.join(names())}") from None


def names(heuristic_only: bool = False) -> list[str]:
    """Registered names, in registration order."""
    return [n for n, info in _REGISTRY.items() if info.heuristic or not heuristic_only]


def resolve(methods: str | list[str]) -> list[str]:
    """Expand ``"all"`` (every heuristic) and comma lists; check each name."""
    items = methods.split(",") if isinstance(methods, str) else list(methods)
    out: list[str] = []
    for m in (s.strip() for s in items):
        if not m:
            continue
        for name in (names(heuristic_only=True) if m == "all" else [get(m).name]):
            if name not in out:
                out.append(name)
    if not out:
        raise PlacerError("no method named")
    return out


def place(name: str, graph: OpGraph, cluster: Cluster, *, objective: str = "step_time",
          **options: Any) -> Placement:
    """Run placer `name`, then score its placement with the simulator.

    `objective` is ``step_time`` or ``throughput`` (`placer.objectives`).
    A placer that optimises it receives it as ``objective=``; the others place
    as they always do. The result's ``step_time`` is always the simulator's;
    for ``throughput`` its ``max_load`` is filled too. Its ``meta`` holds
    ``place_seconds`` (wall time of the placer alone) and, when the placer
    does not optimise `objective`, ``ignored_objective``.
    """
    from placer.objectives import check_objective, evaluate

    info = get(name)
    check_objective(objective)
    if objective in info.objectives and objective != "step_time":
        options = {**options, "objective": objective}
    t0 = time.perf_counter()
    placement = info.fn(graph, cluster, **options)
    elapsed = time.perf_counter() - t0
    placement.method = name
    placement.meta["place_seconds"] = elapsed
    if objective not in info.objectives:
        placement.meta["ignored_objective"] = objective
    return evaluate(graph, cluster, placement, objective)
