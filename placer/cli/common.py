"""What the commands share besides their output: common options, checks of what they name, and how a
command or script stops (Ctrl-C, SIGTERM, bad input). What they print is in `placer.cli.output`.

Only the standard library is imported at module level: every command's
`add_parser` runs for ``placer --help``, which must stay fast.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Callable

GRAPH_FILE_HELP = "graph file (.json or .json.gz)"
CLUSTER_HELP = "preset name (see `placer clusters`) or cluster JSON file"
# `placer.objectives.OBJECTIVES` and `placer.rl.config.WARM_STARTS`, repeated so that parsing the command line
# imports no numba (importing placer.rl registers method rl); tests/placer/cli/test_common.py checks they agree.
OBJECTIVES = ("step_time", "throughput")
WARM_STARTS = ("heuristic", "none")
MAX_DIM = 2**31 - 1
"""Largest batch, tensor dimension or estimate a command takes: TensorFlow and Keras compute shapes in int32
(Dropout's mask at --batch 10**11 failed inside TensorFlow with a page-long error), and past int64 Python's
ints do not even reach TensorFlow."""


class _Said:
    """A config default as a help text says it: a flag "on" or "off", a tuple its items, else as formatted."""

    def __init__(self, value: Any):
        self.value = value

    def __format__(self, spec: str) -> str:
        if isinstance(self.value, bool):
            return "on" if self.value else "off"
        if isinstance(self.value, tuple):
            return " ".join(map(str, self.value))
        return format(self.value, spec)

    def __repr__(self) -> str:
        return repr(self.value)


class ConfigHelp(argparse.HelpFormatter):
    """Help texts that say the defaults of a `placer.rl.config` class (`config`) as ``{field}``
    (``{field!r}``, ``{field:g}``), filled in when help is printed rather than when the parser is built:
    importing `placer.rl` loads numba, and every command's parser is built for ``placer --help``."""

    config = "TrainConfig"

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = super()._get_help_string(action)
        if not text or "{" not in text:
            return text
        from dataclasses import fields

        from placer.rl import config

        cls = getattr(config, self.config)
        return text.format_map({f.name: _Said(getattr(cls, f.name)) for f in fields(cls)})


def config_help(config: str) -> type[argparse.HelpFormatter]:
    """A `ConfigHelp` for the `placer.rl.config` class named `config` (e.g. ``"PretrainConfig"``)."""
    return type(f"{config}Help", (ConfigHelp,), {"config": config})


# -- options several commands take ---------------------------------------------
def add_graph_and_cluster(p: argparse.ArgumentParser) -> None:
    """GRAPH and a required ``--cluster``: what a one-graph, one-cluster command reads.

    `load_graph_and_cluster` loads what they name.
    """
    p.add_argument("graph", help=GRAPH_FILE_HELP)
    p.add_argument("--cluster", required=True, help=CLUSTER_HELP)


def add_objective(p: argparse.ArgumentParser, help: str, default: str | None = "step_time") -> None:
    """``--objective step_time|throughput``; `help` says what the command does with it."""
    p.add_argument("--objective", choices=OBJECTIVES, default=default, help=help)


def add_grouping_flags(p: argparse.ArgumentParser, remark: str, critical_remark: str | None = None) -> None:
    """``--[no-]kind-groups``, ``--[no-]balanced-groups`` and ``--[no-]critical-groups``
    (`placer.grouping.group_graph`'s ``split_kinds``, ``balanced`` and ``split_critical``), for the commands
    that train a policy. Each help text ends with its default, from the parser's `ConfigHelp`, and `remark`
    (`critical_remark`, when given, for the last).
    Unset flags are None, so a command can tell "not given" from "off"."""
    critical_remark = remark if critical_remark is None else critical_remark
    p.add_argument("--kind-groups", action=argparse.BooleanOptionalAction, default=None,
                   help="group apart ops that run fastest on different kinds of device (the tiny ops a host CPU "
                        f"runs faster than a GPU), so they can go there (default {{kind_groups}}{remark})")
    p.add_argument("--balanced-groups", action=argparse.BooleanOptionalAction, default=None,
                   help="before letting a group take more than 2/G of the compute, merge small groups that are "
                        f"neighbours in topological order (default {{balanced_groups}}{remark})")
    p.add_argument("--critical-groups", action=argparse.BooleanOptionalAction, default=None,
                   help="group the ops on a critical path apart from the rest, so the path can stay on one device "
                        f"(default {{critical_groups}}{critical_remark})")


def add_run_folder(p: argparse.ArgumentParser) -> None:
    """``--out DIR`` and ``--resume``: where a long run keeps its files, and continuing it there.

    `run_folder` checks ``--out`` when the command runs.
    """
    p.add_argument("--out", required=True, metavar="DIR", help="folder for the run's files")
    p.add_argument("--resume", action="store_true",
                   help="continue the run saved in DIR (an error when DIR holds none, or one of another graph "
                        "or cluster)")


def add_placement_option(p: argparse.ArgumentParser) -> None:
    """A required ``--placement`` file: what a command that runs or pins a placed graph reads."""
    p.add_argument("--placement", required=True, help="placement JSON file ({'devices': {op: device}})")


def add_json_flag(p: argparse.ArgumentParser, what: str) -> None:
    """``--json``: print `what` (e.g. "the result") as JSON instead of text."""
    p.add_argument("--json", action="store_true", help=f"print {what} as JSON")


# -- checking and loading what the options name ---------------------------------
def quiet_tensorflow() -> None:
    """Keep TensorFlow's start-up notices and Keras's warnings off the terminal (call before importing them).

    TF 2.21 prints a oneDNN notice (through absl, which TF_CPP_MIN_LOG_LEVEL
    does not silence) unless oneDNN's graph rewrites are off. Importing runs
    no kernels that matter, so turning them off costs nothing here.
    """
    import os
    import warnings

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    # Keras warns about what a placement does not use: the optimizer state a .keras file saved before its
    # first step lacks, an image model's unusual channel count; the graph is imported all the same
    warnings.filterwarnings("ignore", category=UserWarning, module=r"keras(\.|$)")


def load_graph_and_cluster(args: argparse.Namespace):
    """The graph and cluster named by `add_graph_and_cluster`'s options, loaded and checked.

    Returns
    -------
    (OpGraph, Cluster)

    Raises
    ------
    PlacerError
        If either file is missing or invalid, or the preset is unknown.
    """
    from placer.presets import load_cluster
    from placer.graph_io import load_graph

    return load_graph(args.graph), load_cluster(args.cluster)


def run_folder(out: str) -> Path:
    """``--out`` as a Path; a PlacerError when it names a file (it may not exist yet)."""
    from placer.errors import PlacerError

    path = Path(out)
    if path.exists() and not path.is_dir():
        raise PlacerError(f"--out {str(path)!r} is a file, not a folder")
    return path


def output_file(path: str | None, flag: str, inputs: tuple = ()) -> Path | None:
    """The file an output option (``-o``, ``--trace``, ...) names, checked before any work is done.

    Its folder must already exist, as with most Unix tools: a mistyped path
    is an error rather than a new tree of folders (only a run folder, ``--out
    DIR``, is created). None stays None (the option was not given). It must
    not be one of the command's `inputs` (paths; None skipped): writing the
    result over the graph it was made from loses the user's file.

    Raises
    ------
    PlacerError
        If the folder is missing or not a folder, `path` names a folder, or it is one of `inputs`.
    """
    from placer.errors import PlacerError

    if path is None:
        return None
    file = Path(path)
    if not file.parent.is_dir():
        missing = "is not a folder" if file.parent.exists() else "does not exist"
        raise PlacerError(f"{flag} {path!r}: folder {str(file.parent)!r} {missing}")
    if file.is_dir():
        raise PlacerError(f"{flag} {path!r} is a folder, not a file")
    if file.exists() and any(i is not None and Path(i).exists() and Path(i).samefile(file) for i in inputs):
        raise PlacerError(f"{flag} {path!r} is this command's input; write the result to another file")
    return file


EXIT_INTERRUPTED = 130
"""The exit code of a command stopped by Ctrl-C or SIGTERM (128 + SIGINT, as shells report it)."""
LOCK_FILE = ".lock"
CLAIM_WAIT_SECONDS = 15.0
"""How long a run waits for another process to let go of its folder: a trainer the service left behind on a
restart saves its checkpoint and exits within seconds; a second run started by hand waits this long, then stops."""


def claim_run_folder(out: Path, what: str):
    """Lock the run folder `out` (which must exist) for this process, so that two runs never write one
    folder's files at once; returns the open lock file, to keep for as long as the run goes (the lock ends
    with the process, however it ends).

    Raises
    ------
    PlacerError
        When another process still holds it after `CLAIM_WAIT_SECONDS`, naming that process.
    """
    import fcntl
    import os
    import time

    from placer.errors import PlacerError

    lock = open(out / LOCK_FILE, "a+")
    deadline = time.monotonic() + CLAIM_WAIT_SECONDS
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                lock.seek(0)
                holder = lock.read().strip()
                lock.close()
                raise PlacerError(f"{str(out)!r} is in use by another {what}"
                                  + (f" (process {holder})" if holder.isdigit() else "")
                                  + "; wait for it to end, or choose another --out") from None
            time.sleep(0.2)
    lock.seek(0)
    lock.truncate()
    lock.write(str(os.getpid()))
    lock.flush()
    return lock


def check_resume(out: Path, saved: bool, resume: bool, what: str, orphans: bool = False) -> bool:
    """Whether to continue the run in `out` (`saved`: it holds a saved one); a PlacerError when the flags disagree.

    A saved run is never started over without ``--resume``, and ``--resume``
    with nothing to continue is refused (the user expects a resume), unless
    a run was begun there (it wrote progress.json) but stopped before its
    first checkpoint: then it starts again, with a note (the service resumes
    whatever job it started).
    """
    from placer.errors import PlacerError

    if saved and not resume:
        raise PlacerError(f"{str(out)!r} already holds a {what}; pass --resume to continue it or choose another --out")
    if resume and not saved:
        from placer.rl.run_folder import PROGRESS_FILE

        if not (out / PROGRESS_FILE).exists():
            raise PlacerError(f"no {what} to resume in {str(out)!r}; drop --resume to start one")
        when = ("was cut off as it saved a checkpoint (there are checkpoint files but no state saying what they "
                "are)" if orphans else "stopped before its first checkpoint")
        print(f"note: the {what} in {str(out)!r} {when}; starting it again", file=sys.stderr)
    return saved and resume


def check_name(name: str | None, flag: str = "--name") -> None:
    """Refuse an empty or blank name (it would silently fall back to the default)."""
    from placer.errors import PlacerError

    if name is not None and not name.strip():
        raise PlacerError(f"{flag} must not be empty")


def check_budget(seconds: float | None) -> None:
    """A PlacerError unless ``--budget-seconds`` is positive (or not given)."""
    from placer.errors import PlacerError

    if seconds is not None and not seconds > 0:
        raise PlacerError(f"--budget-seconds must be positive, got {seconds:g}")


def check_at_least(args: argparse.Namespace, *options: str, least: int = 1, most: int | None = None) -> None:
    """A PlacerError unless each of `options` (dest names, e.g. ``"per_round"``) is `least` or more (and `most`
    or less), or not given.

    The message names the flag: "--per-round must be at least 1, got 0" ("must be 0 or more" when `least` is 0;
    "must be from 1 to 100" with `most`).
    """
    from placer.errors import PlacerError

    bound = (f"from {least} to {most}" if most is not None else "0 or more" if least == 0 else f"at least {least}")
    for option in options:
        value = getattr(args, option)
        if value is not None and (value < least or (most is not None and value > most)):
            raise PlacerError(f"--{option.replace('_', '-')} must be {bound}, got {value}")


def checked_config(config):
    """`config` (a `placer.rl.config` instance) after its `check`, its error naming the flag, not the field:
    "--samples must be an integer of at least 2 (...)", where the config says "samples must ...".

    Raises
    ------
    PlacerError
        On the first value no run can use.
    """
    from dataclasses import fields

    from placer.errors import PlacerError

    try:
        return config.check()
    except PlacerError as e:
        message = str(e)
        for f in fields(config):
            if message.startswith(f"{f.name} must "):
                raise PlacerError(f"--{f.name.replace('_', '-')}{message[len(f.name):]}") from None
        raise


def add_refine_sweeps(p: argparse.ArgumentParser) -> None:
    """``--refine-sweeps N``, beside a command's ``--refine-seconds``."""
    p.add_argument("--refine-sweeps", type=int, metavar="N",
                   help="with --refine-seconds: stop the local search after N sweeps, so that the same input "
                        "gives the same placement on any machine (when S is generous enough not to stop it first)")


def check_refine(seconds: float | None, sweeps: int | None, objective: str) -> None:
    """A PlacerError unless ``--refine-seconds``/``--refine-sweeps`` make sense together and for `objective`."""
    from placer.errors import PlacerError

    if seconds is not None and not 0 < seconds < float("inf"):  # the search keeps no state to resume from
        raise PlacerError(f"--refine-seconds must be a positive, finite number of seconds, got {seconds!r}")
    if seconds is not None and objective == "throughput":
        raise PlacerError(f"--refine-seconds refines step time, not {objective!r}")
    if sweeps is not None and seconds is None:
        raise PlacerError("--refine-sweeps needs --refine-seconds (the search's time limit)")
    if sweeps is not None and sweeps < 1:
        raise PlacerError(f"--refine-sweeps must be at least 1, got {sweeps}")


# -- stopping: signals and errors ------------------------------------------------
@contextlib.contextmanager
def sigterm_as_ctrl_c():
    """While in the block, SIGTERM (`kill`, a job runner) raises KeyboardInterrupt as Ctrl-C does, so a command
    stops with one line and exit 130 instead of dying silently; `StopOnSignal` takes both over in a long loop,
    to save first. The old handler comes back when the block ends."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield
        return

    def stop(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old if old is not None else signal.SIG_DFL)


def os_error_line(e: OSError) -> str:
    """An OSError as the one line a user reads: the file, then what the system said."""
    where = f"{str(e.filename)!r}: " if e.filename is not None else ""
    return f"{where}{e.strerror or e}"


def run_script(main: Callable[[], int | None], name: str, resume: str) -> None:
    """``sys.exit(main())`` for a script (bench/): Ctrl-C or SIGTERM ends it with exit 130 and one line
    saying how to go on (`resume`), bad input (a `PlacerError`) or a refused file (`OSError`) with exit 1 and
    one line naming it, as the CLI does; not a traceback."""
    from placer.errors import PlacerError, interrupted

    try:
        with sigterm_as_ctrl_c():
            code = main()
    except PlacerError as e:
        print(f"{name}: error: {e}", file=sys.stderr)
        sys.exit(1)
    except OSError as e:  # a missing folder, a read-only file...: not a bug
        print(f"{name}: error: {os_error_line(e)}", file=sys.stderr)
        sys.exit(1)
    except BaseException as e:
        if not interrupted(e):
            raise
        print(f"{name}: interrupted; {resume}", file=sys.stderr)
        sys.exit(130)
    sys.exit(code)


class StopOnSignal:
    """While in a ``with`` block, SIGINT (Ctrl-C) and SIGTERM ask a long run to stop.

    The first signal only sets `requested`, so the loop can finish its step and
    save; a second one raises KeyboardInterrupt at once, unless it lands in a
    `placer.errors.uninterruptible` block (a training step's update of weights
    and state): then the run stops once the block is over, as after the first.
    The old handlers come back when the block ends.
    """

    def __init__(self) -> None:
        self.requested = False
        self._old: dict = {}

    def __enter__(self) -> "StopOnSignal":
        import signal

        self._old = {s: signal.signal(s, self._handle) for s in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, *exc) -> None:
        import signal

        for s, handler in self._old.items():
            signal.signal(s, handler)

    def _handle(self, signum, frame) -> None:
        from placer.errors import in_uninterruptible

        if self.requested and not in_uninterruptible():  # a second Ctrl-C: stop now
            raise KeyboardInterrupt
        self.requested = True
