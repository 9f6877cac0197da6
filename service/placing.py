"""Run placement methods for the service: one by name, or ``best`` of all heuristics.

Everything here goes through `placer.placers.registry.place`, which has the
simulator score each result, so the methods compared are judged alike. The
service adds no placement logic: ``best`` and its candidates are the
library's (`placer.placers.best.place_best`, as ``placer place --method best``).
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from typing import Any

from placer import presets
from placer.cluster import Cluster
from placer.errors import PlacerError
from placer.graph import OpGraph
from placer.placement import Placement
from placer.placers import registry
from placer.placers.best import BEST, candidates, place_best, run_candidates
import placer.rl  # noqa: F401  (registers method rl: placer.rl.method)

__all__ = ["BEST", "RL", "baselines", "candidates", "check_method", "check_options", "method_names", "place_best",
           "place_one", "refined", "resolve_cluster", "shipped_policy", "warm_up", "zero_shot"]

log = logging.getLogger("placer.service")

RL = "rl"

OPTION_LIMITS: dict[str, float] = {
    "lp_time_limit": 60.0,  # m_sct's LP (default 60)
    "time_limit": 60.0,  # the list schedulers' and pipeline_dp's time cap (default 60: placer.placers.time_cap)
    "pair_budget": 300_000_000,  # pipeline_dp's DP (default 30 million: ~10x the time)
    "max_ideals": 400_000,  # pipeline_dp's DP (default 40,000)
}
"""Largest value a request may give an option that sets how long a placer runs (as refine_seconds is
capped at 60): the library takes any positive number, and ``time_limit: 1e9`` would let pipeline_dp's
``search_moves`` and ``kicks`` hold a request thread and a core for decades."""


def method_names() -> list[str]:
    """Every ``method`` a placement request may name: the registered placers, then ``best`` (and ``rl``)."""
    names = registry.names()
    return [*names, BEST, *([] if RL in names else [RL])]


def check_method(name: str) -> None:
    """Refuse a method the service does not know, listing those it does (the registry's list lacks ``best``).

    Raises
    ------
    PlacerError
        If `name` is not in `method_names`.
    """
    if name not in method_names():
        raise PlacerError(f"unknown method {name!r}; methods: {', '.join(method_names())}")


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
    """Refuse options the placer does not take (`placer.placers.registry.PlacerInfo.check_options`: those
    ``GET /v1/placers`` lists, of the right type and range), or over `OPTION_LIMITS`, naming them.

    Raises
    ------
    PlacerError
        If an option is not one of the placer's, has a bad value, or is over its limit.
    """
    if not options:
        return
    for key, limit in OPTION_LIMITS.items():
        value = options.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not value <= limit:
            raise PlacerError(f"method {name!r}: option {key} may be at most {limit:g} in this service, "
                              f"got {value!r}")
    registry.get(name).check_options(options)


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
    check_method(name)
    check_options(name, options)
    if not options:
        return registry.place(name, graph, cluster, objective=objective)
    try:
        return registry.place(name, graph, cluster, objective=objective, **options)
    except (TypeError, ValueError) as e:
        raise PlacerError(f"method {name!r}: bad option value ({e})") from None


def refined(placement: Placement | None, graph: OpGraph, cluster: Cluster, seconds: float,
            sweeps: int | None = None) -> Placement | None:
    """`placement` after `seconds` (and at most `sweeps` sweeps) of local search (`placer.placers.refine`);
    unchanged when `seconds` is 0."""
    if placement is None or seconds == 0:
        return placement
    from placer.placers.refine import refine

    return refine(graph, cluster, placement, seconds=seconds, max_sweeps=sweeps)


def baselines(graph: OpGraph, cluster: Cluster, *, objective: str = "step_time",
              names: list[str] | None = None, budget_seconds: float = math.inf,
              known: Placement | None = None) -> dict[str, float | None]:
    """Step time of every candidate heuristic; `known` (already placed) is reused for its method."""
    todo = candidates(objective, names)
    skip = known.method if known is not None and known.method in todo else None
    _, step_times, _ = run_candidates([n for n in todo if n != skip], graph, cluster, objective, budget_seconds)
    if skip is not None:
        step_times = {skip: known.step_time, **step_times}
    return step_times


def zero_shot(graph: OpGraph, cluster: Cluster, seed: int = 0, steer: bool | None = None) -> Placement | None:
    """The shipped pre-trained policy's best-of-K placement (no training), or None when it cannot place here.

    The greedy placement and `placer.rl.zero_shot.default_samples` samples seeded by `seed` (the request's,
    which its fine-tuning job is given too, so the job starts from this answer), all scored by the
    simulator: the same graph, cluster and seed always get the same answer.
    Its ``meta.policy`` names the policy (name, version, fine_tuned); it is
    what method ``rl`` answers until its job has a placement. Unless `steer` is False (the job option), the
    policy's placements also steer HEFT and CPOP op by op (`placer.rl.steering.steers`), and the job, a
    fine-tune, starts from that answer.
    """
    from placer.rl.steering import steers
    from placer.rl.zero_shot import default_samples, place_zero_shot

    try:
        return place_zero_shot(graph, cluster, shipped_policy(), samples=default_samples(len(graph)), seed=seed,
                               method=RL, steer=steers(steer))
    except PlacerError as e:  # e.g. more devices than the policy addresses: the job still runs
        log.warning("zero-shot placement of %r on %r failed: %s", graph.name, cluster.name, e)
        return None


_policy_lock = threading.Lock()
_policy: tuple[Any, Any] | None = None
"""The shipped policy as last read, with the identity of its folder then (see `shipped_policy`)."""


def shipped_policy() -> Any:
    """The shipped pre-trained policy, read once and shared by every request (read again only when its folder
    is replaced).

    Reading it parses the header of each of its ~50 arrays with `ast.literal_eval` (numpy's ``.npy`` format).
    CPython 3.11's AST constructor keeps its recursion counter in state that all threads share, so two
    threads building ASTs at once can fail with ``SystemError: AST constructor recursion depth mismatch``:
    read per request, two ``rl`` requests at once (or one beside the warm-up thread, or beside a test
    importing modules pytest rewrites) could fail so. Read once, under a lock, nothing is parsed after.

    Raises
    ------
    PlacerError
        If the shipped policy cannot be read.
    """
    global _policy
    from placer.rl.saved_policy import SHIPPED_POLICY_DIR, load_policy

    with _policy_lock:
        try:
            st = os.stat(SHIPPED_POLICY_DIR)
            identity: Any = (st.st_dev, st.st_ino, st.st_mtime_ns)
        except OSError:
            identity = None
        if _policy is None or _policy[0] != identity:
            _policy = (identity, load_policy())
        return _policy[1]


def warm_up() -> None:
    """Compile what a first answer runs (the numba kernels of the simulator, the grouping and the
    heuristics that have their own) by placing a small synthetic graph as ``rl`` and as ``best`` do.

    numba caches compiled kernels on disk, but a fresh install (or a container, whose cache is in /tmp)
    compiles them at the first placement: ~7 s added to it. Never fatal: a failure here is logged and the
    first request compiles instead.
    """
    from placer.synthetic import layered_graph

    t0 = time.perf_counter()
    try:
        graph, cluster = layered_graph(200, seed=0), presets.get("2gpu")
        zero_shot(graph, cluster)
        place_best(graph, cluster)
    except Exception:
        log.exception("warming up failed; the first placement compiles instead")
        return
    log.info("warmed up in %.1f s", time.perf_counter() - t0)
