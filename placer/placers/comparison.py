"""Run several placers on several graphs and clusters: the rows of `placer compare`.

Every row is scored by the same simulator (through `registry.place`), so the
numbers compare. A placer that fails gives a row with its error instead of
stopping the run. Method ``best`` (`placer.placers.best.place_best`) is a row
too: the heuristic it chose is its ``chosen``.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable

from placer.cluster import Cluster
from placer.errors import PlacerError, interrupted
from placer.graph import OpGraph
from placer.placers import registry
from placer.placers.best import BEST, place_best, rank
from placer.placers.refine import refine

ROW_FIELDS = ("graph", "cluster", "method", "step_time", "lower_bound", "oom", "place_seconds")


def resolve_methods(methods: str | list[str]) -> list[str]:
    """`registry.resolve` (``all``: every heuristic, comma lists, names checked), with ``best`` kept in its place.

    Raises
    ------
    PlacerError
        If a name is neither a registered placer nor ``best``, or none is named.
    """
    items = methods.split(",") if isinstance(methods, str) else list(methods)
    out: list[str] = []
    for m in (s.strip() for s in items):
        try:
            found = [BEST] if m == BEST else registry.resolve([m]) if m else []
        except PlacerError as e:  # the registry lists its placers; a comparison also takes these two
            raise PlacerError(f"{e}, or 'all' (every heuristic), '{BEST}'") from None
        for name in found:
            if name not in out:
                out.append(name)
    if not out:
        return registry.resolve([])  # its error
    return out


def compare(graphs: Iterable[OpGraph], clusters: Iterable[Cluster], methods: list[str], *,
            progress: Callable[[int, int, dict[str, Any]], None] | None = None,
            reuse: dict[tuple[str, str, str], dict[str, Any]] | None = None,
            method_options: dict[str, dict[str, Any]] | None = None,
            refine_seconds: float | None = None, refine_sweeps: int | None = None,
            placements: dict[tuple[str, str, str], Any] | None = None,
            **place_options: Any) -> list[dict[str, Any]]:
    """One row per (graph, cluster, method), in that nesting order.

    Parameters
    ----------
    graphs, clusters : what to place on what.
    methods : placer names (already resolved, e.g. by `resolve_methods`), ``best`` among them or not: its
        row is `place_best`'s answer (the candidates for the objective, taking those this comparison placed
        already as they are), its ``chosen`` the heuristic chosen.
    progress : called after each row as ``progress(done, total, row)``.
    reuse : rows of an earlier, interrupted run by ``(graph, cluster, method)``;
        those made for the same objective, refinement and `method_options`
        (an rl row trained for 10 s is no answer to a zero-shot request), of
        the same graph and cluster (``graph_fingerprint``, ``cluster_fingerprint``:
        a file changed under the same name is placed again), are taken as they are instead of placing again.
    place_options : passed to `registry.place` (e.g. ``objective="throughput"``, which
        adds ``max_load`` to each row, and ``ignored_objective`` for methods
        that do not optimise it).
    method_options : options for one method only, by name (e.g.
        ``{"rl": {"budget_seconds": 60}}``), on top of `place_options`; a row
        made with some keeps them as ``method_options``.
    refine_seconds : then improve every placement by this much local search
        (`placer.placers.refine`, the same for every method); the row's
        ``step_time`` is the refined one, ``unrefined_step_time`` the method's own.
    refine_sweeps : with `refine_seconds`, at most this many sweeps of the search.
    placements : when given, filled with each placement made (the refined one,
        with `refine_seconds`) as a device index per op, by ``(graph, cluster,
        method)``; rows taken from `reuse` and failed methods have none.

    Returns
    -------
    list of dict
        Rows with `ROW_FIELDS`, ``graph_fingerprint`` (`OpGraph.fingerprint`) and ``cluster_fingerprint``
        (`Cluster.fingerprint`); a failed method's row
        has ``error`` (one line) and None for the numbers.
    """
    graphs, clusters = list(graphs), list(clusters)
    total = len(graphs) * len(clusters) * len(methods)
    objective = place_options.get("objective", "step_time")
    rows: list[dict[str, Any]] = []
    for graph in graphs:
        for cluster in clusters:
            made: dict[str, Any] = {}  # unrefined placements of this graph and cluster, for best
            for method in methods:
                row: dict[str, Any] = {"graph": graph.name, "cluster": cluster.name, "method": method,
                                       "graph_fingerprint": graph.fingerprint,
                                       "cluster_fingerprint": cluster.fingerprint}
                own = (method_options or {}).get(method, {})
                if own:
                    row["method_options"] = own
                earlier = (reuse or {}).get((graph.name, cluster.name, method))
                if (earlier is not None and earlier.get("objective", "step_time") == objective
                        and earlier.get("graph_fingerprint", graph.fingerprint) == graph.fingerprint
                        and earlier.get("cluster_fingerprint", cluster.fingerprint) == cluster.fingerprint
                        and earlier.get("refine_seconds") == refine_seconds
                        and earlier.get("refine_sweeps") == refine_sweeps
                        and earlier.get("method_options", {}) == own):
                    rows.append(earlier)
                    if progress is not None:
                        progress(len(rows), total, earlier)
                    continue
                try:
                    options = {**place_options, **own}
                    if method == BEST:
                        p, _ = place_best(graph, cluster, objective=objective, known=made)
                        row["chosen"] = p.method
                    else:
                        p = registry.place(method, graph, cluster, **options)
                        if not own:
                            made[method] = p
                    if refine_seconds is not None:
                        row.update(unrefined_step_time=p.step_time, refine_seconds=refine_seconds)
                        if refine_sweeps is not None:
                            row["refine_sweeps"] = refine_sweeps
                        p = refine(graph, cluster, p, seconds=refine_seconds, max_sweeps=refine_sweeps)
                except Exception as e:  # one method failing must not sink the comparison
                    if interrupted(e):  # Ctrl-C inside the compiled simulator: stop, as Ctrl-C elsewhere
                        raise KeyboardInterrupt from e
                    row.update(step_time=None, lower_bound=None, oom=None, place_seconds=None,
                               error=f"{type(e).__name__}: {e}")
                else:
                    if placements is not None:
                        placements[(graph.name, cluster.name, method)] = p.assignment(graph, cluster)
                    row.update(step_time=p.step_time, lower_bound=p.lower_bound, oom=p.oom,
                               place_seconds=p.meta.get("place_seconds"))
                    if objective != "step_time":
                        row["objective"] = objective
                    if p.max_load is not None:
                        row["max_load"] = p.max_load
                    if "ignored_objective" in p.meta:
                        row["ignored_objective"] = p.meta["ignored_objective"]
                rows.append(row)
                if progress is not None:
                    progress(len(rows), total, row)
    return rows


def winners(rows: list[dict[str, Any]], by: str = "step_time") -> dict[tuple[str, str], str]:
    """The best method by `by` (``step_time`` or ``max_load``; `placer.placers.best.rank`) per (graph, cluster),
    where one fits with a finite `by`."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["graph"], r["cluster"]), []).append(r)
    best: dict[tuple[str, str], str] = {}
    for key, group in groups.items():
        first = group[rank([r.get(by) for r in group], [bool(r.get("oom")) for r in group])[0]]
        t = first.get(by)
        if t is not None and not first.get("oom") and math.isfinite(t):
            best[key] = first["method"]
    return best
