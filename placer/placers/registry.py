"""The placer registry: every placement method, heuristic or learned, by name.

A placer is a function ``(graph, cluster, *, options...) -> Placement`` that
fills ``devices``; its options are typed keyword-only parameters
(`placer.placers.options`), which the registry lists and checks. `place`
runs one, times it, and has the simulator score the result, so every method
is judged the same way.

The registry is filled by the modules that register placers, never by
importing them itself: Python runs ``placer/placers/__init__.py``, which
imports every heuristic, before this module, so the heuristics are always
registered; method ``rl`` is registered by ``placer.rl`` (`placer.rl.method`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Callable

from placer.cluster import Cluster
from placer.errors import PlacerError
from placer.graph import OpGraph
from placer.placement import Placement
from placer.placers.options import OptionSpec, signature_options

PlacerFn = Callable[..., Placement]


@dataclass(frozen=True)
class PlacerInfo:
    """A registered placer.

    Attributes
    ----------
    name : the method name users give (``--method``, ``"method"``).
    fn : ``(graph, cluster, *, options...) -> Placement``.
    description : one line for `placer place --help` and ``GET /v1/placers``.
    heuristic : part of the ``all`` set (fast, no training).
    objectives : objectives the placer optimises; for others it still places,
        and says it ignored the objective.
    option_specs : the options users may give, read from `fn`'s signature.
    hooks : `fn`'s other keyword-only parameters, for Python callers only
        (``objective``, which `place` passes; rl's ``on_step``).
    """

    name: str
    fn: PlacerFn
    description: str
    heuristic: bool = True
    objectives: tuple[str, ...] = ("step_time",)
    option_specs: tuple[OptionSpec, ...] = ()
    hooks: frozenset[str] = frozenset()

    @property
    def options(self) -> dict[str, str]:
        """Each option with one line saying what it does and its default (``GET /v1/placers`` lists them)."""
        return {spec.name: spec.doc for spec in self.option_specs}

    def check_options(self, options: dict[str, Any], *, hooks: bool = False) -> dict[str, Any]:
        """`options` checked and converted (an ``int`` option given ``4.0`` gets ``4``).

        `hooks` allows the placer's keyword-only parameters that are not
        options (Python callers pass them; users may not), unchecked.

        Raises
        ------
        PlacerError
            Naming an option the placer does not take (and listing those it
            does), or one whose value has the wrong type or is out of range.
        """
        specs = {spec.name: spec for spec in self.option_specs}
        unknown = sorted(k for k in options if k not in specs and not (hooks and k in self.hooks))
        if unknown:
            takes = f"; it takes {', '.join(specs)}" if specs else "; it takes none"
            raise PlacerError(f"method {self.name!r}: unknown option(s) {', '.join(unknown)}{takes}")
        return {k: specs[k].check(self.name, v) if k in specs else v for k, v in options.items()}


_REGISTRY: dict[str, PlacerInfo] = {}


def register(name: str, *, description: str, heuristic: bool = True, objectives: tuple[str, ...] = ("step_time",)
             ) -> Callable[[PlacerFn], PlacerFn]:
    """Decorator: register `fn` under `name`, its options read from its signature.

    Raises
    ------
    ValueError
        If another function has that name.
    TypeError
        If `fn`'s signature is not ``(graph, cluster, *, options...)`` with
        defaults and checkable types (`placer.placers.options.signature_options`).
    """

    def wrap(fn: PlacerFn) -> PlacerFn:
        if name in _REGISTRY and _REGISTRY[name].fn is not fn:
            raise ValueError(f"placer {name!r} registered twice")
        specs, hooks = signature_options(fn)
        _REGISTRY[name] = PlacerInfo(name, fn, description, heuristic, objectives, specs, hooks)
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
    A placer that optimises it and has an ``objective`` parameter receives it
    as ``objective=``; the others place as they always do. `options` are
    checked first (`PlacerInfo.check_options`, hooks allowed).

    Returns a new placement (the placer's own answer is left as it was): its
    ``step_time`` is always the simulator's; for ``throughput`` its
    ``max_load`` is filled too. Its ``meta`` holds ``place_seconds`` (wall
    time of the placer alone) and, when the placer does not optimise
    `objective`, ``ignored_objective``.
    """
    from placer.objectives import check_objective, evaluate

    info = get(name)
    check_objective(objective)
    options = info.check_options(options, hooks=True)
    if objective in info.objectives and "objective" in info.hooks:
        options = {**options, "objective": objective}
    t0 = time.perf_counter()
    placement = info.fn(graph, cluster, **options)
    elapsed = time.perf_counter() - t0
    meta = {**placement.meta, "place_seconds": elapsed}
    if objective not in info.objectives:
        meta["ignored_objective"] = objective
    return evaluate(graph, cluster, replace(placement, method=name, meta=meta), objective)
