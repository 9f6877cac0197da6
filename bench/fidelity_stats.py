"""How well simulated step times agree with measured ones (and with themselves), and their scatter plot."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def spearman(a, b) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic)


def mape(sim, real) -> float:
    sim, real = np.asarray(sim), np.asarray(real)
    return float(np.mean(np.abs(sim - real) / real))


def max_ratio(sim, real) -> float:
    sim, real = np.asarray(sim), np.asarray(real)
    return float(np.max(np.maximum(sim / real, real / sim)))


def measurement_noise(result: dict) -> dict:
    """How well the measurements agree with themselves: the ceiling any simulator's Spearman can reach.

    ``split_half_spearman``: Spearman between the medians of the even and the
    odd rounds (the same placements, measured twice), ``split_half_spearman_p10``
    the same of their 10th percentiles (the ceiling of ``spearman_p10``); ``duplicate_spread``: the
    largest relative gap between medians of placements that are the same
    assignment (e.g. ``single`` and ``single:0``), measured as different rows.
    """
    out: dict = {}
    rows, per = result["rows"], result.get("per_round", 3)
    if all("times" in r for r in rows):
        for key, statistic in (("split_half_spearman", np.median),
                               ("split_half_spearman_p10", lambda ts: np.percentile(ts, 10))):
            halves = [[float(statistic([t for k, t in enumerate(r["times"]) if (k // per) % 2 == parity]))
                       for r in rows] for parity in (0, 1)]
            out[key] = spearman(*halves)
    by_assignment: dict = {}
    for r in rows:
        by_assignment.setdefault(tuple(r["assignment"]), []).append(r["measured"])
    gaps = [max(v) / min(v) - 1 for v in by_assignment.values() if len(v) > 1]
    if gaps:
        out["duplicate_spread"] = max(gaps)
    sims = [r["simulated"] for r in rows if "simulated" in r]
    if sims:
        out["simulated_spread"] = max(sims) / min(sims) - 1
    meds = [r["measured"] for r in rows]
    out["measured_spread"] = max(meds) / min(meds) - 1
    return out


def plot(results: dict, path: Path) -> None:
    """Simulated against measured step (median and 10th percentile) per graph of `results`, one panel each."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n, r in results.items() if isinstance(r, dict) and "rows" in r]
    if not names:
        return
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 4), squeeze=False)
    for ax, n in zip(axes[0], names):
        r = results[n]
        s = np.array([x["simulated"] for x in r["rows"]]) * 1e3
        m = np.array([x["measured"] for x in r["rows"]]) * 1e3
        lo = np.array([x["measured_p10"] for x in r["rows"]]) * 1e3
        ax.plot(s, m, "o", ms=5, alpha=0.75, label=f"median (Spearman {r['spearman']:.2f})")
        ax.plot(s, lo, "x", ms=5, alpha=0.75, label=f"p10 (Spearman {r['spearman_p10']:.2f})")
        bottom, top = min(s.min(), lo.min()) * 0.95, max(s.max(), m.max()) * 1.05
        ax.plot([bottom, top], [bottom, top], "k--", lw=0.8, label="measured = simulated")
        ax.set_xlim(bottom, top)
        ax.set_ylim(bottom, top)
        ax.legend(fontsize=8)
        ax.set_xlabel("simulated step (ms)")
        ax.set_ylabel("measured step (ms)")
        ax.set_title(f"{n}: Spearman {r['spearman']:.2f}, MAPE {100 * r['mape']:.0f}%")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
