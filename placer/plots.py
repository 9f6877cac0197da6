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
    are hatched and labelled ``OOM``; failed methods are left out.

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
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 + len(groups) * len(methods) * 0.28), 4.2))
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
    ax.set_xticks(x)
    ax.set_xticklabels([f"{g}\n{c}" for g, c in groups], fontsize=8)
    ax.set_ylabel("step time / lower bound (lower is better)")
    ax.set_title(title or "Simulated step time of each placement")
    ax.legend(fontsize=7, ncol=min(len(methods), 4), loc="upper left", bbox_to_anchor=(0, -0.18))
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path
