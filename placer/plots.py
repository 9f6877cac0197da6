"""Figures of placements and comparisons (matplotlib, drawn off-screen with Agg)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def compare_chart(rows: list[dict[str, Any]], path: str | Path, title: str | None = None) -> Path:
    """Grouped bars: step time / lower bound for each (graph, cluster) and method.

    A ratio of 1 is the best any placement could do. Out-of-memory placements
    are hatched and labelled ``OOM``; failed methods are left out. The axis
    turns logarithmic when some ratio exceeds 5.

    Parameters
    ----------
    rows : rows of `placer.placers.comparison.compare`.
    path : the image file to write (format from its suffix, e.g. ``.png``).
    title : the figure's title.

    Returns
    -------
    Path
        `path`.
    """
    plt = _pyplot()
    groups = list(dict.fromkeys((r["graph"], r["cluster"]) for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    ratio = np.full((len(groups), len(methods)), np.nan)
    oom = np.zeros_like(ratio, dtype=bool)
    for r in rows:
        t, lb = r.get("step_time"), r.get("lower_bound")
        if t is None or not lb or not math.isfinite(t):
            continue
        g, m = groups.index((r["graph"], r["cluster"])), methods.index(r["method"])
        ratio[g, m] = t / lb
        oom[g, m] = bool(r.get("oom"))
    width = 0.8 / max(len(methods), 1)
    fig, ax = plt.subplots(figsize=(min(16.0, max(6.0, 1.2 + len(groups) * len(methods) * 0.28)), 4.8))
    x = np.arange(len(groups))
    colors = plt.get_cmap("tab10")
    for m, name in enumerate(methods):
        pos = x - 0.4 + width * (m + 0.5)
        bars = ax.bar(pos, np.nan_to_num(ratio[:, m]), width, label=name, color=colors(m % 10))
        for g, bar in enumerate(bars):
            if oom[g, m]:
                bar.set_hatch("//")
                ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height(), "OOM", ha="center",
                        va="bottom", fontsize=6, rotation=90)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    if np.nanmax(ratio, initial=1.0) > 5:  # one bad method must not flatten the others
        ax.set_yscale("log")
    ax.set_xticks(x)
    crowded = len(groups) > 12
    ax.set_xticklabels([f"{g} {c}" if crowded else f"{g}\n{c}" for g, c in groups],
                       fontsize=7 if len(groups) > 8 else 8, rotation=90 if crowded else 0)
    ax.set_ylabel("step time / lower bound (lower is better)")
    ax.set_title(title or "Simulated step time of each placement")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def _time_unit(seconds: float) -> tuple[float, str]:
    """A scale and unit that keep a span of `seconds` readable."""
    for scale, unit in ((1.0, "s"), (1e3, "ms"), (1e6, "µs")):
        if seconds * scale >= 1.0:
            return scale, unit
    return 1e9, "ns"


def gantt_chart(graph, cluster, assignment, result, path: str | Path, title: str | None = None,
                max_types: int = 9) -> Path:
    """The simulated step as a Gantt chart, with each device's memory below.

    Devices are rows with their ops coloured by type (the `max_types` types
    with the most compute time get their own colour, the rest are "other");
    each link direction that carried a tensor is a row of its transfers' holds
    on it (`placer.trace.link_holds`: on a topology, a switch's uplink is a
    row, and a transfer shows on each direction of its route). The
    lower panel is the bytes live on each device (`placer.trace.memory_timeline`).

    Parameters
    ----------
    graph, cluster : what was simulated.
    assignment : int[num_ops] device index of each op.
    result : `Simulator(graph, cluster).run(assignment)`.
    path : the image file to write (format from its suffix).
    title : the figure's title.
    max_types : op types given their own colour.

    Returns
    -------
    Path
        `path`.
    """
    from placer.trace import direction_names, link_holds, memory_timeline

    plt = _pyplot()
    place = np.asarray(assignment, dtype=np.int64)
    names = cluster.device_names
    D = len(names)
    dur = result.finish - result.start
    types = np.array([op.op for op in graph.ops])
    by_time: dict[str, float] = {}
    for t, d in zip(types.tolist(), dur.tolist()):
        by_time[t] = by_time.get(t, 0.0) + d
    top = sorted(by_time, key=by_time.get, reverse=True)[:max_types]
    holds = link_holds(graph, cluster, place, result)
    links = sorted({h[0] for h in holds})
    link_names = direction_names(cluster)
    rows = names + [link_names[r] for r in links]
    scale, unit = _time_unit(max(result.step_time, 1e-12))

    from matplotlib.patches import Patch

    lanes = 0.45 * D + 0.22 * len(links)
    fig, (ax, mem_ax) = plt.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [max(lanes, 1.0), 1.6]},
                                     figsize=(11, 1.4 + lanes + 1.6))
    colors = plt.get_cmap("tab10")
    kinds = [(t, types == t, colors(k)) for k, t in enumerate(top)]
    handles = []
    rest = ~np.isin(types, top)
    if rest.any():
        kinds.append(("other", rest, (0.75, 0.75, 0.75, 1.0)))
    for label, mask, color in kinds:
        for d in range(D):
            sel = mask & (place == d)
            if sel.any():
                ax.broken_barh(np.c_[result.start[sel] * scale, dur[sel] * scale], (d - 0.4, 0.8),
                               facecolors=color, edgecolors="none")
        handles.append(Patch(color=color, label=label))
    for row, r in enumerate(links, start=D):
        bars = np.array([(t0, held) for (rr, _, _, _, t0, held) in holds if rr == r])
        ax.broken_barh(bars * scale, (row - 0.3, 0.6), facecolors="#444444", edgecolors="white", linewidth=0.3)
    if links:
        handles.append(Patch(color="#444444", label="transfer"))
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(rows, fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(0, result.step_time * scale * 1.01 or 1)
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0), title="op type",
              title_fontsize=7)
    ax.set_title(title or f"{graph.name} on {cluster.name}: step {result.step_time * scale:.4g} {unit}"
                 + ("  (OUT OF MEMORY)" if result.oom else ""))

    giga = 2.0 ** 30
    for d, (times, level) in enumerate(memory_timeline(graph, place, result)):
        t = np.append(times, result.step_time) * scale
        mem_ax.step(t, np.append(level, level[-1]) / giga, where="post", color=colors(d % 10), linewidth=1,
                    label=f"{names[d]} (peak {result.peak_memory[d] / giga:.3g} of "
                          f"{result.memory_bytes[d] / giga:.3g} GiB)")
    mem_ax.set_ylabel("live GiB")
    mem_ax.set_xlabel(f"time ({unit})")
    mem_ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0))
    fig.tight_layout()
    _save(plt, fig, path, dpi=110)
    return Path(path)


def _save(plt, fig, path: str | Path, dpi: int) -> None:
    """Save and close a figure; an unknown format or unwritable path is a user error."""
    from placer.errors import PlacerError

    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=dpi, bbox_inches="tight")
    except (OSError, ValueError) as e:
        raise PlacerError(f"figure {str(path)!r}: cannot write ({e})") from None
    finally:
        plt.close(fig)
