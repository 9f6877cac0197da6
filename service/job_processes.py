"""The training processes of jobs, as the operating system sees them: started so that they die with the
service, run nicer than it, signalled, and found again (or stopped) after a crash."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

log = logging.getLogger("placer.service")


PARENT_DEATH_GUARD = """\
import ctypes, os, signal, sys
ctypes.CDLL(None).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG: kept across the exec below
if os.getppid() != int(sys.argv[1]):  # the service died before the signal was asked for
    sys.exit(1)
try:
    os.execvp(sys.argv[2], sys.argv[2:])
except OSError as e:
    sys.exit(f"cannot start the training process ({e})")
"""
"""Run before the training command, in its process: asks Linux to send it SIGTERM when its parent (the
service's job monitor thread) dies, then becomes the command (same pid)."""


def dying_with_the_service(cmd: list[str]) -> list[str]:
    """`cmd` behind `PARENT_DEATH_GUARD` (Linux; elsewhere `cmd` itself, and the next start stops a process
    the service left, as `service.jobs.JobRunner` does on recovery).

    Not a ``preexec_fn``: with one, Python forks instead of using vfork, which runs the libraries' fork
    handlers, and OpenBLAS's (loaded with numpy) joins its threads there: the service deadlocked starting a
    job now and then.
    """
    if not sys.platform.startswith("linux"):
        return cmd
    return [sys.executable, "-I", "-S", "-c", PARENT_DEATH_GUARD, str(os.getpid()), *cmd]


def lower_priority(pid: int, niceness: int) -> None:
    """Make a job's process group `niceness` nicer than the service. The whole group, every thread of it at
    once (Linux applies a process group's priority per thread), so threads the trainer starts before this
    runs are lowered too, and those it starts later inherit it. A failure only costs speed: logged, not fatal."""
    if niceness <= 0:
        return
    try:
        os.setpriority(os.PRIO_PGRP, pid, min(os.getpriority(os.PRIO_PROCESS, 0) + niceness, 19))
    except OSError as e:
        log.warning("could not lower the priority of job process %d (%s); it runs at the service's", pid, e)


def send_signal(proc: subprocess.Popen, sig: int) -> None:
    try:
        proc.send_signal(sig)
    except (ProcessLookupError, OSError):
        pass


def signal_name(number: int) -> str:
    """``SIGKILL`` for 9: how a process killed by a signal ended (Popen's return code is minus the number)."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def is_job_process(pid: int, job_dir: str) -> bool:
    """True if `pid` is alive and is the training process of `job_dir` (not a recycled pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return job_dir.encode() in cmdline


def stop_orphan(pid: int, job_dir: str, timeout: float) -> None:
    """Stop a training process that outlived a crashed service (SIGTERM, then SIGKILL)."""
    if not is_job_process(pid, job_dir):
        return
    log.info("stopping training process %d left by a previous run (%s)", pid, job_dir)
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not is_job_process(pid, job_dir) or is_zombie(pid):
            return
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"
