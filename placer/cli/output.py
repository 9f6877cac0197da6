"""What the commands print: JSON, aligned tables, sizes and times a person reads, and progress lines.

Only the standard library is imported at module level, as in `placer.cli.common`: commands import this
module when they run, and ``placer --help`` must stay fast.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import sys
from typing import Any, Callable, Iterable, Sequence


def print_json(obj: Any) -> None:
    """Print `obj` as JSON on stdout (NaN and infinity become null)."""
    json.dump(_clean(obj), sys.stdout, indent=1)
    sys.stdout.write("\n")


def _clean(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if hasattr(obj, "tolist"):
        return _clean(obj.tolist())
    return obj


def print_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Print rows as aligned columns with a header line."""
    text = [[_fmt(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in text]) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip())
    for r in text:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            if abs(n) >= 1e6:
                return f"{n:.3g} {unit}"
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n} B"


def seconds_per_unit(graph) -> float:
    """Seconds in one unit of `graph`'s times (`human_seconds`'s `unit`): 1, but for an MSR workload 1e-3.

    The MSR importer keeps the dataset's milliseconds as they are, so that
    the published max loads come out exactly; printed as seconds, a 201 ms
    step would read "201 s".
    """
    if graph.meta.get("format") == "msr":
        from placer.importers.msr import SECONDS_PER_TIME_UNIT

        return SECONDS_PER_TIME_UNIT
    return 1.0


def human_seconds(s: float | None, unit: float = 1.0) -> str:
    """`s` time units (`unit` seconds each, see `seconds_per_unit`) as s, ms or us."""
    if s is None or not math.isfinite(s):
        return "-"
    s = s * unit
    if s >= 1e6:  # a cluster or graph of absurd sizes: a readable figure, not hundreds of digits
        return f"{s:.3g} s"
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e6:.1f} us"


def plural(n: int, noun: str) -> str:
    """``"1 step"``, ``"2 steps"``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def race_line(race: dict, unit: float = 1.0) -> str:
    """One line on a race of warm starts (``meta["race"]``): where each start began, ended, and when it was dropped.

    `unit`: seconds per time unit of the graph (`seconds_per_unit`)."""
    def one(r: dict) -> str:
        best = human_seconds(r["best_step_time"], unit) if r["best_step_time"] is not None else "not trained"
        dropped = r["dropped_after_round"]
        return (f"{r['heuristic']} {human_seconds(r['heuristic_step_time'], unit)} -> {best} "
                f"({plural(r['steps'], 'step')}, "
                f"{r['elapsed_seconds']:.0f} s" + (f", dropped after round {dropped + 1})" if dropped is not None
                                                     else ")"))
    return "raced warm starts: " + "; ".join(one(r) for r in race["starts"])


# -- progress of a long run ----------------------------------------------------
class LogLines:
    """Progress for a log file: where stderr is not a terminal (tqdm's bars are off there), a line every
    `every` seconds, so that a long run under nohup or a job runner shows it is alive."""

    def __init__(self, every: float = 10.0) -> None:
        self.on = not sys.stderr.isatty()
        self.every, self.last = every, -math.inf

    def __call__(self, line: Callable[[], str]) -> None:
        """Print `line()` (made only when due) unless a line was printed under `every` seconds ago."""
        import time

        now = time.monotonic()
        if self.on and now - self.last >= self.every:
            print(line(), file=sys.stderr, flush=True)
            self.last = now


@contextlib.contextmanager
def heuristics_shown():
    """While a run sets up, a line on stderr as each heuristic finishes (its step time and seconds:
    `placer.placers.best.ranked_heuristics` logs them on ``placer.best``); at 100k ops they take minutes."""
    logger = logging.getLogger("placer.best")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("  heuristic %(message)s"))
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


IMITATION_NOTE_SECONDS = 5.0
"""How often a warm start's imitation prints a progress line (`placer train`, `placer place --method rl`)."""


class ProgressLine:
    """Training progress, one live line on stderr: redrawn in place on a terminal, printed every 10 s into a
    log file (the first step at once). `placer train` and `placer place --method rl` show it."""

    LOG_EVERY_SECONDS = 10.0

    def __init__(self, steps: int | None, budget: float | None, unit: float = 1.0):
        self.steps, self.budget, self.unit = steps, budget, unit
        self.stream = sys.stderr
        self.tty = self.stream.isatty()
        self.last_print = -math.inf
        self.drawn = False

    def note(self, text: str) -> None:
        """A line of its own (on a terminal, below the live line, which the next step redraws)."""
        if self.drawn:
            self.stream.write("\n")
            self.drawn = False
        print(text, file=self.stream, flush=True)

    def show(self, stats) -> None:
        """The line for one step's `placer.rl.trainer.StepStats`."""
        import time

        done = [f"step {stats.step}/{self.steps}" if self.steps else f"step {stats.step}"]
        if self.budget:
            done.append(f"{stats.elapsed_seconds:.0f}/{self.budget:.0f} s")
        line = (f"{' '.join(done)} | {stats.samples_per_second:.0f} samples/s | "
                f"best {human_seconds(stats.best_step_time, self.unit)} | "
                f"mean reward {stats.mean_reward:.4f} | entropy {stats.entropy:.3f}")
        now = time.monotonic()
        if self.tty:
            self.stream.write("\r\033[K" + line)
            self.stream.flush()
            self.drawn = True
        elif now - self.last_print >= self.LOG_EVERY_SECONDS:
            print(line, file=self.stream, flush=True)
            self.last_print = now

    def close(self) -> None:
        """End the live line (call when training stops)."""
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()
            self.drawn = False


def steered_line(steered: dict, unit: float) -> str:
    """What steering (`placer.rl.steering`) gave: the schedule chosen, or why the policy's answer stood."""
    before = human_seconds(steered["unsteered_step_time"], unit)
    if steered.get("not_steered"):
        return f"not steered ({steered['not_steered']})"
    if steered["chosen"] is None:
        return f"steered: no schedule beat the policy's answer ({before}; {len(steered['schedules'])} tried)"
    return f"steered: {steered['chosen']} beat the policy's answer ({before})"
