"""The files a training or pre-training run keeps in its folder, beside its checkpoint.

- ``history.csv``: one row per step, appended as steps finish; a resumed run
  keeps the rows up to its checkpoint's step and drops the rest (and any row
  a kill cut short);
- ``progress.json``: rewritten atomically, so a reader (the REST service)
  never sees half of it;
- ``curve.png``: drawn when the run stops (`plot_training_curve`,
  `plot_pretraining_curve`);
- checkpoints every so many seconds (`Cadence`).

What each command writes in them (the columns, the progress fields) is its
own: ``placer train`` (`placer.cli.train`) and ``placer pretrain``
(`placer.rl.pretrain`). The formats are contracts the service and the
benchmarks read.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

from placer.fileio import write_atomic

# the files of a `placer train` run folder: a contract with the service, which reads them (placer/cli/train.py)
HISTORY_FILE = "history.csv"
PROGRESS_FILE = "progress.json"
CURVE_FILE = "curve.png"
BEST_FILE = "best_placement.json"
REFINED_FILE = "refined_placement.json"
RESULT_FILE = "result.json"
TRAINER_STATE_FILE = "trainer_state.json"
RACE_STATE_FILE = "race_state.json"


def written_files(racing: bool) -> tuple[str, ...]:
    """The files a finished run folder holds, as `placer train --json` lists them."""
    state = RACE_STATE_FILE if racing else TRAINER_STATE_FILE
    return BEST_FILE, RESULT_FILE, HISTORY_FILE, CURVE_FILE, PROGRESS_FILE, state


class History:
    """``history.csv``: a header, then one row per step.

    Parameters
    ----------
    path : the file; rewritten from the rows kept.
    fields : the columns.
    keep_until : a resumed run's step: earlier rows up to it are kept (0: none, a fresh run).
    flush_every_row : flush each row as it is written (else only at `flush`, e.g. at checkpoints).
    """

    def __init__(self, path: Path, fields: Sequence[str], keep_until: int = 0, flush_every_row: bool = True):
        rows = []
        if keep_until > 0 and path.exists():
            with open(path, newline="") as f:  # a kill can leave the last row cut short
                rows = [r for r in csv.DictReader(f) if None not in r.values() and int(r["step"]) <= keep_until]
        self.flush_every_row = flush_every_row
        self.file = open(path, "w", newline="")
        self.writer = csv.DictWriter(self.file, fieldnames=list(fields))
        self.writer.writeheader()
        self.writer.writerows(rows)
        self.file.flush()

    def append(self, row: dict[str, Any]) -> None:
        """Write one step's row (its keys are the columns)."""
        self.writer.writerow(row)
        if self.flush_every_row:
            self.file.flush()

    def flush(self) -> None:
        self.file.flush()

    def close(self) -> None:
        self.file.close()


def read_history(path: Path) -> list[dict[str, str]]:
    """The rows of a ``history.csv``, as strings."""
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def read_progress(folder: Path) -> dict[str, Any] | None:
    """``progress.json`` in `folder` as last written (None when absent or unreadable)."""
    try:
        data = json.loads((folder / PROGRESS_FILE).read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_progress(folder: Path, progress: dict[str, Any]) -> None:
    """Rewrite ``progress.json`` in `folder` atomically."""
    write_atomic(folder / PROGRESS_FILE, json.dumps(progress).encode())


class Cadence:
    """Something done every `seconds` of wall time (a checkpoint, an evaluation), counted from the last time.

    ``if c.due(): ...; c.done()``: `done` restarts the count when the work has finished.
    """

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.last = time.monotonic()

    def due(self, now: float | None = None) -> bool:
        return (time.monotonic() if now is None else now) - self.last > self.seconds

    def done(self, now: float | None = None) -> None:
        self.last = time.monotonic() if now is None else now


@contextlib.contextmanager
def _figure(path: Path, size: tuple[float, float]) -> Iterator[Any]:
    """A matplotlib axis (no display needed), saved to `path` on leaving."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=size, dpi=110)
    try:
        yield ax
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)


def plot_training_curve(history_path: Path, png_path: Path, *, title: str, bound: float, throughput: bool,
                        heuristic: tuple[str, float] | None) -> None:
    """``placer train``'s curve.png: each step's best and mean sample, and the best so far, against wall time,
    with the best heuristic's step time (`heuristic`: name, step time) and the lower bound."""
    rows = read_history(history_path)
    with _figure(png_path, (7, 4)) as ax:
        if rows:
            t = [float(r["elapsed_seconds"]) for r in rows]
            ax.scatter(t, [float(r["mean_step_time"]) * 1e3 for r in rows], s=4, alpha=0.35, label="mean of samples")
            ax.scatter(t, [float(r["min_step_time"]) * 1e3 for r in rows], s=4, alpha=0.6,
                       label="best sample of step")
            ax.step(t, [float(r["best_step_time"]) * 1e3 for r in rows], where="post", color="k",
                    label="best so far")
        if heuristic:
            ax.axhline(heuristic[1] * 1e3, color="tab:red", ls="--", lw=1, label=f"best heuristic ({heuristic[0]})")
        ax.axhline(bound * 1e3, color="tab:green", ls=":", lw=1, label="lower bound")
        ax.set_xlabel("wall time (s)")
        ax.set_ylabel("max device load (ms: 1000 x the graph's time unit)" if throughput
                      else "simulated step time (ms)")
        ax.set_title(title)
        if rows:
            lo = bound * 1e3 * 0.95
            hi = min(max(float(r["mean_step_time"]) for r in rows), 3 * float(rows[-1]["best_step_time"])) * 1e3
            ax.set_ylim(lo, max(hi, lo * 1.2))
        ax.legend(fontsize=7, loc="upper right")


def plot_pretraining_curve(evals: list[dict[str, Any]], png_path: Path, *, pairs: int) -> None:
    """``placer pretrain``'s curve.png: the greedy policy's geometric-mean step time relative to the teachers,
    on the training and the validation pairs, at each evaluation."""
    ev = [e for e in evals if math.isfinite(e["geomean_ratio"])]
    with _figure(png_path, (7, 4)) as ax:
        if ev:
            ax.plot([e["elapsed_seconds"] for e in ev], [e["geomean_ratio"] for e in ev], "o-", label="greedy policy")
            val = [e for e in ev if math.isfinite(e.get("validation_geomean_ratio", math.inf))]
            if val:
                ax.plot([e["elapsed_seconds"] for e in val], [e["validation_geomean_ratio"] for e in val], "s-",
                        label="greedy, validation graphs (never trained on)")
        ax.axhline(1.0, color="tab:red", ls="--", lw=1, label="teacher (best cheap heuristic)")
        ax.set_xlabel("wall time (s)")
        ax.set_ylabel("step time / teacher's (geometric mean)")
        ax.set_title(f"pre-training over {pairs} graph-cluster pairs")
        ax.legend(fontsize=8)
