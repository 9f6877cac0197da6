"""Training jobs: each one a `placer train` subprocess, followed through its job folder.

The service never trains in its own process. A job is a folder under
``<data_dir>/jobs/<id>/`` holding its inputs (``graph.json.gz``,
``cluster.json``), the process's ``train.log``, and what the process writes:
``progress.json`` (atomically, every step) and ``best_placement.json``. The
database holds the service's view of the job's state:

    queued -> running -> done | failed | interrupted
                      -> cancelling -> cancelled           (DELETE /v1/jobs/{id})
    running --(service stops or crashes)--> queued again, resumed with --resume
    running --(process killed from outside, e.g. by the OOM killer)--> queued again, resumed with
              --resume once if it has a checkpoint (`MAX_RETRIES`); else failed, saying so

A monitor thread reaps finished processes and starts queued jobs, at most
``max_running_jobs`` at once. On start-up, jobs a crash or restart left
"running" are stopped if their process outlived the service, then queued to
resume from their checkpoint; none is left "running".

A training process dies with the service (Linux: the parent-death signal,
SIGTERM, so it checkpoints first; see `dying_with_the_service`): after
``kill -9`` of the service it does not train on unsupervised until the next
start, which resumes it. The process is started by the monitor thread only,
which lives as long as the service: the parent-death signal fires when the
*thread* that started the process ends, and a request thread of the pool
ends when idle.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import math
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from placer.cli.common import EXIT_INTERRUPTED
from placer.cluster import Cluster
from placer.graph import OpGraph
from placer.fileio import write_atomic
from placer.graph_io import save_graph
from placer.placement import Placement
from placer.rl.run_folder import (BEST_FILE, PROGRESS_FILE, RACE_STATE_FILE, REFINED_FILE,
                                   TRAINER_STATE_FILE)
from service.core.config import Settings
from service.graph_store import new_id
from service.job_processes import (dying_with_the_service, lower_priority, send_signal, signal_name,
                                   stop_orphan)
from service.storage import JobRecord, Storage, StorageFull

log = logging.getLogger("placer.service")

ACTIVE = ("queued", "running", "cancelling")
FINISHED = ("done", "failed", "interrupted", "cancelled")
MAX_STARTS = 5
"""A job whose process has been started this often is failed rather than resumed again."""
MAX_RETRIES = 1
"""Times a job whose process was killed from outside (SIGKILL from the OOM killer or ``kill -9``: it could
neither save nor report) is resumed from its last checkpoint before it is failed. Once, since a run killed
for its memory use is likely to be killed again at the same point."""
CHECKPOINT_FILES = (TRAINER_STATE_FILE, RACE_STATE_FILE)
"""What `placer train` writes in the job folder once it has a checkpoint to resume from (with ``--starts K``
the second)."""


class JobQueueFull(Exception):
    """Too many jobs wait for a slot (HTTP 429); `retry_after`: seconds until a slot may free (its header)."""

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


RETRY_AFTER_BOUNDS = (1, 3600)
"""Seconds a 429's ``Retry-After`` may say: a running job's budget can be hours, but jobs end early too."""


def read_json(path: Path) -> Any | None:
    """A JSON file's content, or None when it is missing or not (yet) valid JSON."""
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None


class JobRunner:
    """Starts, follows, cancels and recovers training processes.

    Parameters
    ----------
    storage : where job records live.
    settings : data directory, train command, concurrency and timing knobs.
    """

    def __init__(self, storage: Storage, settings: Settings):
        self.storage = storage
        self.settings = settings
        self.owner = False
        self._lock_file: Any = None
        self._procs: dict[str, subprocess.Popen] = {}
        self._term_sent: dict[str, float] = {}
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._halt = threading.Event()
        self.closing = threading.Event()
        """Set when the service is told to stop, before it drains its requests (see `close_soon`)."""
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._rounds = threading.Condition()
        self._rounds_started = 0
        self._rounds_done = 0

    # -- life cycle ------------------------------------------------------
    def start(self) -> None:
        """Take the jobs of this data dir if no other service process has them, then start the monitor.

        Several service processes (uvicorn workers, or two ``placer serve`` on
        one data dir) share the jobs through the database; a lock file makes
        exactly one of them the owner, which starts, reaps and recovers the
        processes. The others record and cancel jobs, and one of them takes
        over (recovering the jobs) if the owner goes away.
        """
        self.settings.jobs_dir.mkdir(parents=True, exist_ok=True)
        self._lock_file = open(self.settings.jobs_dir / "runner.lock", "a+")
        if self._try_own():
            self._recover()
        else:
            log.info("another service process runs the jobs of %s; this one records and follows them",
                     self.settings.data_dir)
        self._thread = threading.Thread(target=self._run, name="placer-jobs", daemon=True)
        self._thread.start()
        self._poll_soon()

    def _try_own(self) -> bool:
        """Take the runner lock without waiting; True if this process now owns the jobs."""
        try:
            fcntl.flock(self._lock_file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        self.owner = True
        return True

    def stop(self) -> None:
        """Stop the monitor; SIGTERM running jobs so they checkpoint, and queue them to resume."""
        with self._lock:
            self._stopping = True
            for proc in self._procs.values():
                send_signal(proc, signal.SIGTERM)
        self._halt.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if not self.owner:
            self._lock_file.close()
            return
        deadline = time.monotonic() + self.settings.job_stop_seconds
        with self._lock:
            for job_id, proc in list(self._procs.items()):
                try:
                    proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    log.warning("job %s did not stop within %.0f s of SIGTERM; killing it",
                                job_id, self.settings.job_stop_seconds)
                    proc.kill()
                    proc.wait()
                self._finish(job_id, proc)
        self._lock_file.close()  # releases the lock: another process may take the jobs over

    def close_soon(self) -> None:
        """The service has been told to stop (SIGTERM, Ctrl-C) and drains its open requests before `stop`.

        Meanwhile no queued job is started, a process that does not own the jobs no longer takes them
        over (the owner may stop first: the follower then restarted the jobs it had just checkpointed,
        only to stop them again), and requests waiting for a job (``method: rl``) answer at once instead
        of holding the shutdown for up to ``max_wait_seconds``. Safe to call from a signal handler.
        """
        self.closing.set()
        self._wake.set()

    # -- requests --------------------------------------------------------
    def submit(self, *, graph: OpGraph, cluster: Cluster, graph_id: str | None,
               budget_seconds: float, seed: int, options: dict[str, Any] | None = None,
               owner: str | None = None) -> JobRecord:
        """Write the job's inputs, record it as queued (owned by `owner`), and wake the monitor, which
        starts it if a slot is free."""
        job_id = new_id("j")
        job_dir = (self.settings.jobs_dir / job_id).resolve()
        now = time.time()
        record = JobRecord(
            id=job_id, graph_id=graph_id, graph_name=graph.name, cluster=cluster.name,
            budget_seconds=float(budget_seconds), seed=int(seed), state="queued",
            job_dir=str(job_dir), created_at=now, updated_at=now, options=dict(options or {}), owner=owner,
        )
        try:
            save_graph(graph, job_dir / "graph.json.gz")
            write_atomic(job_dir / "cluster.json", json.dumps(cluster.to_dict()).encode())
            added = self.storage.add_job(record=record, max_queued=self.settings.max_queued_jobs)
        except (OSError, StorageFull) as e:
            shutil.rmtree(job_dir, ignore_errors=True)  # no folder of a job that was never recorded
            if isinstance(e, OSError) and e.errno == errno.ENOSPC:
                raise StorageFull(f"the service's disk is full ({e.strerror}); the job was not created") from None
            raise
        if not added:  # `check_capacity` passed, but other requests filled the queue meanwhile
            shutil.rmtree(job_dir, ignore_errors=True)
            raise JobQueueFull(f"{self.settings.max_queued_jobs} jobs are already waiting (max_queued_jobs); "
                               "try again later", self.retry_after())
        self._poll_soon()
        return self.storage.get_job(job_id=job_id) or record

    def cancel(self, job_id: str, tenant: str | None = None) -> JobRecord | None:
        """Cancel a queued or running job `tenant` owns (None: any; SIGTERM: it checkpoints and exits); finished
        jobs stay as they are. None if `tenant` has no such job."""
        if self.storage.get_job(job_id=job_id, tenant=tenant) is None:
            return None
        with self._lock:
            # Each change names the state it expects: the owner (maybe another process) may start or
            # finish the job meanwhile, and a cancel decided on an older read would undo that (a job
            # left "cancelling" forever after it ended, or "cancelled" while its process ran on).
            record = self.storage.update_job(job_id=job_id, if_state=("queued",), state="cancelled", resume=False)
            if record is not None and record.state == "running":
                # The owner of the process sees "cancelling" at its next poll and sends SIGTERM.
                record = self.storage.update_job(job_id=job_id, if_state=("running",), state="cancelling")
        if record is not None and record.state == "cancelling":
            self._poll_soon()
        return record

    def check_capacity(self) -> None:
        """Refuse a new job while ``max_queued_jobs`` jobs already wait for a slot: early, before a request
        does its work (`submit` enforces the limit itself when it stores the job).

        Raises
        ------
        JobQueueFull
        """
        waiting = len(self.storage.list_jobs(limit=self.settings.max_queued_jobs + 1, offset=0, states=("queued",)))
        if waiting >= self.settings.max_queued_jobs:
            raise JobQueueFull(f"{waiting} jobs are already waiting (max_queued_jobs); try again later",
                               self.retry_after())

    def retry_after(self) -> int:
        """Seconds until the running job nearest the end of its budget should finish and free a slot (by its
        ``progress.json``), within `RETRY_AFTER_BOUNDS`; the least when no job runs (one is about to start)."""
        low, high = RETRY_AFTER_BOUNDS
        left = []
        for record in self.storage.list_jobs(limit=self.settings.max_running_jobs, offset=0,
                                             states=("running", "cancelling")):
            if record.state == "cancelling":  # its slot frees as soon as it has saved
                left.append(0.0)
                continue
            elapsed = (self.progress(record) or {}).get("elapsed_seconds")
            elapsed = elapsed if isinstance(elapsed, (int, float)) and math.isfinite(elapsed) else 0.0
            left.append(record.budget_seconds - elapsed)
        return int(min(max(math.ceil(min(left, default=low)), low), high))

    def running_count(self) -> int:
        """Training processes running for this data dir (whichever service process owns them)."""
        return len(self.storage.list_jobs(limit=1_000_000, offset=0, states=("running", "cancelling")))

    @staticmethod
    def progress(record: JobRecord) -> dict[str, Any] | None:
        """What the job's process last wrote to ``progress.json`` (None before its first write)."""
        data = read_json(Path(record.job_dir) / PROGRESS_FILE)
        return data if isinstance(data, dict) else None

    @staticmethod
    def result(record: JobRecord) -> dict[str, Any] | None:
        """The job's best placement so far, in the contract form (None until it has one).

        With option ``refine_seconds`` a finished job also wrote ``refined_placement.json`` (its best after
        local search); the faster of the two is the result.
        """
        found = [p for p in (_placement_file(Path(record.job_dir) / name)
                             for name in (BEST_FILE, REFINED_FILE)) if p is not None]
        if not found:
            return None
        return min(found, key=lambda p: (p.oom, p.step_time if p.step_time is not None else math.inf)).to_dict()

    # -- monitor ---------------------------------------------------------
    def _run(self) -> None:
        """Monitor thread: wait to own the jobs (if another process has them), then follow them."""
        while not self.owner:
            if self._halt.wait(1.0) or self.closing.is_set():
                return
            with self._lock:
                if self._try_own():
                    log.info("took over the jobs of %s", self.settings.data_dir)
                    self._recover()
        self._loop()

    def _loop(self) -> None:
        while not self._halt.is_set():
            with self._rounds:
                self._rounds_started += 1
                round_ = self._rounds_started
            try:
                self.poll()
            except Exception:  # the monitor must outlive any one bad job
                log.exception("job monitor: poll failed")
            with self._rounds:
                self._rounds_done = round_
                self._rounds.notify_all()
            self._wake.wait(self.settings.job_poll_seconds)
            self._wake.clear()

    def _poll_soon(self, timeout: float = 5.0) -> None:
        """Have the monitor poll now (it alone starts processes: see the module's docstring) and wait, at most
        `timeout` seconds, for a poll begun after this call to end: a job submitted to a free slot is
        running when `submit` returns, as when requests polled themselves."""
        if not self.owner or self._thread is None or not self._thread.is_alive():
            self._wake.set()
            return
        with self._rounds:
            wanted = self._rounds_started + 1
            self._wake.set()
            self._rounds.wait_for(lambda: self._rounds_done >= wanted or self._halt.is_set(), timeout)

    def poll(self) -> None:
        """Owner only: reap finished processes, signal cancelled ones (kill them if they ignore
        SIGTERM), start queued jobs."""
        with self._lock:
            if not self.owner:
                return
            cancelling = {r.id for r in self.storage.list_jobs(limit=1_000_000, offset=0, states=("cancelling",))}
            for job_id, proc in list(self._procs.items()):
                if proc.poll() is not None:
                    self._finish(job_id, proc)
                elif job_id in cancelling and job_id not in self._term_sent:
                    send_signal(proc, signal.SIGTERM)
                    self._term_sent[job_id] = time.monotonic()
                elif job_id in self._term_sent and \
                        time.monotonic() - self._term_sent[job_id] > self.settings.job_stop_seconds:
                    proc.kill()
            if self._stopping or self.closing.is_set():
                return
            free = self.settings.max_running_jobs - len(self._procs)
            if free > 0:
                for record in self.storage.list_jobs(limit=free, offset=0, states=("queued",)):
                    self._spawn(record)

    def _command(self, record: JobRecord) -> list[str]:
        job_dir = Path(record.job_dir)
        cmd = [
            *self.settings.train_command, str(job_dir / "graph.json.gz"),
            "--cluster", str(job_dir / "cluster.json"),
            "--budget-seconds", repr(record.budget_seconds), "--seed", str(record.seed),
            "--out", str(job_dir),
        ]
        for key, value in sorted(record.options.items()):
            flag = f"--{key.replace('_', '-')}"
            if isinstance(value, bool):  # a switch (steer): on, or off (--no-steer); unset, train's default
                cmd += [flag if value else f"--no-{flag[2:]}"]
            else:
                cmd += [flag, str(value)]
        if record.resume and (job_dir / PROGRESS_FILE).exists():
            cmd.append("--resume")
        return cmd

    def _spawn(self, record: JobRecord) -> None:
        """Start a queued job's process; the job is claimed (queued -> running) first, so a job another
        service process cancelled since it was listed is not started."""
        if record.attempts >= MAX_STARTS:
            self.storage.update_job(job_id=record.id, if_state=("queued",), state="failed", resume=False,
                                    error=f"gave up after {record.attempts} starts")
            return
        # the error a queued job carries says why it runs again (`_killed`); it stays while it runs
        claimed = self.storage.update_job(job_id=record.id, if_state=("queued",), state="running", pid=None,
                                          attempts=record.attempts + 1)
        if claimed is None or claimed.state != "running":
            return
        cmd = self._command(record)
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONUNBUFFERED": "1"}
        try:
            with open(Path(record.job_dir) / "train.log", "ab") as logf:
                logf.write(f"$ {' '.join(cmd)}\n".encode())
                logf.flush()
                # A process group of its own: Ctrl-C on the service's terminal does not reach the job (the
                # service's shutdown sends SIGTERM itself so the job checkpoints). Not a session of its own:
                # Linux's autogroups give each session an equal share of the CPU whatever its niceness, so a
                # job in one would still halve the CPU of answers given at once (`lower_priority`).
                if shutil.which(cmd[0]) is None:  # the guard would start and fail at its exec, later
                    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), cmd[0])
                proc = subprocess.Popen(dying_with_the_service(cmd), stdin=subprocess.DEVNULL, stdout=logf,
                                        stderr=subprocess.STDOUT, env=env, process_group=0)
        except OSError as e:
            self.storage.update_job(job_id=record.id, state="failed", resume=False,
                                    error=f"cannot start the training process ({e})")
            return
        lower_priority(proc.pid, self.settings.job_niceness)
        self._procs[record.id] = proc
        self.storage.update_job(job_id=record.id, pid=proc.pid)
        log.info("job %s started (pid %d)%s", record.id, proc.pid, " resuming" if "--resume" in cmd else "")

    def _finish(self, job_id: str, proc: subprocess.Popen) -> None:
        """Record how a reaped process ended, from its exit code and last progress."""
        self._procs.pop(job_id, None)
        self._term_sent.pop(job_id, None)
        record = self.storage.get_job(job_id=job_id)
        if record is None:
            return
        code = proc.returncode
        prog = self.progress(record) or {}
        reported = prog.get("state")
        if record.state == "cancelling":
            changes: dict[str, Any] = dict(state="cancelled", resume=False, error=None)
        elif reported == "done":
            changes = dict(state="done", resume=False, error=None)
        elif self._stopping:
            changes = dict(state="interrupted", resume=True,
                           error="the service stopped; the job resumes when it starts again")
        elif reported == "interrupted" and code == EXIT_INTERRUPTED:  # else the progress is an earlier attempt's
            changes = dict(state="interrupted", resume=False, error="stopped by a signal from outside the service")
        elif code < 0 and reported != "failed":
            changes = self._killed(record, -code, prog.get("step"))
        else:
            reason = prog.get("error") or _last_line(Path(record.job_dir) / "train.log")
            ended = f"exited with code {code}" if code >= 0 else f"killed by {signal_name(-code)}"
            changes = dict(state="failed", resume=False,
                           error=f"training process {ended}" + (f": {reason}" if reason else ""))
        if changes["state"] == "queued":  # unless cancelled meanwhile (by another service process)
            after = self.storage.update_job(job_id=job_id, if_state=("running",), pid=None, **changes)
            if after is not None and after.state == "cancelling":
                changes = dict(state="cancelled", resume=False, error=None)
        if changes["state"] != "queued":
            self.storage.update_job(job_id=job_id, pid=None, **changes)
        log.info("job %s %s%s", job_id, changes["state"], f": {changes['error']}" if changes.get("error") else "")

    @staticmethod
    def _killed(record: JobRecord, signum: int, step: int | None) -> dict[str, Any]:
        """What becomes of a job whose process a signal killed before it could report (SIGKILL: the OOM killer,
        ``kill -9``): queued to resume from its checkpoint, `MAX_RETRIES` times; else failed, saying why and
        what is left."""
        at = f" at step {step}" if isinstance(step, int) else ""
        ended = f"training process killed by {signal_name(signum)}{at}"
        has_checkpoint = any(isinstance(read_json(Path(record.job_dir) / name), dict) for name in CHECKPOINT_FILES)
        if has_checkpoint and record.retries < MAX_RETRIES:
            return dict(state="queued", resume=True, retries=record.retries + 1,
                        error=f"{ended}; resumed from its last checkpoint (once: if killed again, the job fails)")
        why = ("again, after it was resumed once from its checkpoint" if has_checkpoint
               else "before its first checkpoint, so there is nothing to resume")
        memory = " (SIGKILL often means the machine ran out of memory)" if signum == signal.SIGKILL else ""
        return dict(state="failed", resume=False,
                    error=f"{ended} {why}{memory}; the best placement it found, if any, stays its result, and a "
                          "new job (POST /v1/jobs) trains from the start")

    # -- recovery --------------------------------------------------------
    def _recover(self) -> None:
        """Settle jobs a previous run of the service left active; none stays "running"."""
        for record in self.storage.list_jobs(limit=1_000_000, offset=0,
                                             states=("running", "cancelling", "interrupted")):
            if record.state == "interrupted" and not record.resume:
                continue
            if record.pid is not None and record.state != "interrupted":
                stop_orphan(record.pid, record.job_dir, self.settings.job_stop_seconds)
            if record.state == "cancelling":
                self.storage.update_job(job_id=record.id, state="cancelled", pid=None, resume=False)
            else:
                self.storage.update_job(job_id=record.id, state="queued", pid=None, resume=True,
                                        error=None)
                log.info("job %s was interrupted by a service restart; queued to resume", record.id)


def _last_line(path: Path, limit: int = 300) -> str:
    """The last non-empty line of a log, shortened (the usual place a traceback names its error)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 8192))
            lines = [l.strip() for l in f.read().decode(errors="replace").splitlines() if l.strip()]
    except OSError:
        return ""
    return lines[-1][:limit] if lines else ""


def _placement_file(path: Path) -> Placement | None:
    """The placement in `path`; None if it is missing or half-formed (no result yet, not an error)."""
    data = read_json(path)
    if not isinstance(data, dict):
        return None
    try:
        return Placement.from_dict(data)
    except Exception:
        return None
