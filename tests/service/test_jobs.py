"""JobRunner process management, with the fake trainer (tests/service/fake_train.py).

These test the service's side of the `placer train` contract only: spawning,
reaping, SIGTERM and kill, failure reasons, and recovery after a restart or crash.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from placer import presets
from placer.graph import OpGraph
from service.jobs import JobRunner
from service.sqlite_storage import open_storage
from tests.service.conftest import tiny_graph, wait_for


@pytest.fixture
def storage(settings):
    s = open_storage(settings.database_url)
    yield s
    s.close()


_started: list[JobRunner] = []


@pytest.fixture(autouse=True)
def _stop_runners(storage):
    """Stop every runner a test left going, pass or fail: a monitor thread outliving its test keeps
    polling a closed database and logging tracebacks into later tests. It asks for `storage` so that it
    is torn down first: the runners stop while their database is still open (a runner stopped after it
    failed on the closed database, and the runners after it were never stopped)."""
    yield
    while _started:
        runner = _started.pop()
        if runner._thread is not None and runner._thread.is_alive():
            runner.stop()


def _runner(storage, settings, **overrides):
    runner = JobRunner(storage, settings.model_copy(update=overrides) if overrides else settings)
    runner.start()
    _started.append(runner)
    return runner


def _submit(runner, budget=60.0):
    return runner.submit(graph=OpGraph.from_dict(tiny_graph()), cluster=presets.get("2gpu"), graph_id=None,
                         budget_seconds=budget, seed=0)


def _state(storage, job_id):
    return storage.get_job(job_id=job_id).state


def _crash(runner):
    """What a crash leaves: the monitor gone and the runner lock released (the OS drops a dead process's locks)."""
    runner._halt.set()
    runner._wake.set()
    runner._thread.join()
    runner._lock_file.close()


def _starts(record):
    return (Path(record.job_dir) / "starts.log").read_text().split()


class TestRunner:
    def test_inputs_and_command(self, storage, settings):
        """The job folder holds the graph, the cluster and the log; the command follows the contract."""
        runner = _runner(storage, settings)
        rec = _submit(runner, budget=0.2)
        job_dir = Path(rec.job_dir)
        assert (job_dir / "graph.json.gz").exists()
        assert json.loads((job_dir / "cluster.json").read_text())["name"] == "2gpu"
        wait_for(lambda: _state(storage, rec.id) == "done")
        log = (job_dir / "train.log").read_text()
        assert f"--cluster {job_dir}/cluster.json --budget-seconds 0.2 --seed 0 --out {job_dir}" in log
        runner.stop()

    def test_a_switch_set_false_is_passed_as_its_no_flag(self, storage, settings):
        """steer false must reach `placer train` as --no-steer: left out, train's default (steering) would run."""
        runner = _runner(storage, settings)
        rec = runner.submit(graph=OpGraph.from_dict(tiny_graph()), cluster=presets.get("2gpu"), graph_id=None,
                            budget_seconds=0.2, seed=0, options={"steer": False})
        wait_for(lambda: _state(storage, rec.id) == "done")
        assert "--no-steer" in (Path(rec.job_dir) / "train.log").read_text()
        runner.stop()

    def test_failure_reason(self, storage, settings, monkeypatch):
        """A crashing trainer leaves the job failed with its own error message."""
        monkeypatch.setenv("FAKE_TRAIN_FAIL", "1")
        runner = _runner(storage, settings)
        rec = _submit(runner)
        wait_for(lambda: _state(storage, rec.id) == "failed")
        err = storage.get_job(job_id=rec.id).error
        assert "exited with code 2" in err and "fake failure for the test" in err
        runner.stop()

    def test_a_killed_trainer_is_reported_by_its_signal(self, storage, settings, hold, monkeypatch):
        """A trainer killed from outside (the OOM killer's SIGKILL) read "exited with code -9"; killed before
        its first checkpoint, the job fails saying there is nothing to resume."""
        monkeypatch.setenv("FAKE_TRAIN_NO_CHECKPOINT", "1")
        runner = _runner(storage, settings)
        rec = _submit(runner)
        wait_for(lambda: Path(rec.job_dir, "progress.json").exists())
        os.kill(storage.get_job(job_id=rec.id).pid, signal.SIGKILL)
        wait_for(lambda: _state(storage, rec.id) == "failed")
        err = storage.get_job(job_id=rec.id).error
        assert err.startswith("training process killed by SIGKILL") and "code -9" not in err
        assert "nothing to resume" in err and "POST /v1/jobs" in err
        runner.stop()

    def test_a_killed_trainer_resumes_from_its_checkpoint_once(self, storage, settings, hold):
        """Killed from outside with a checkpoint saved, the job was failed for good although it could go on:
        it resumes from the checkpoint, saying why; killed again, it fails, saying it was resumed once."""
        runner = _runner(storage, settings)
        rec = _submit(runner)
        wait_for(lambda: Path(rec.job_dir, "trainer_state.json").exists())
        first = storage.get_job(job_id=rec.id).pid
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: "resume" in _starts(rec))
        job = storage.get_job(job_id=rec.id)
        assert job.state == "running" and job.attempts == 2 and job.retries == 1
        assert job.error.startswith("training process killed by SIGKILL at step ")
        assert "resumed from its last checkpoint" in job.error
        wait_for(lambda: storage.get_job(job_id=rec.id).pid not in (None, first))
        os.kill(storage.get_job(job_id=rec.id).pid, signal.SIGKILL)
        wait_for(lambda: _state(storage, rec.id) == "failed")
        job = storage.get_job(job_id=rec.id)
        assert "again, after it was resumed once from its checkpoint" in job.error and job.attempts == 2
        assert _starts(rec).count("resume") == 1
        runner.stop()

    def test_a_killed_trainer_resumed_once_can_finish(self, storage, settings, hold):
        """The resumed run continues from the step it had reached and ends done, with no error left."""
        runner = _runner(storage, settings)
        rec = _submit(runner, budget=0.3)
        wait_for(lambda: Path(rec.job_dir, "trainer_state.json").exists())
        os.kill(storage.get_job(job_id=rec.id).pid, signal.SIGKILL)
        wait_for(lambda: "resume" in _starts(rec))
        hold.unlink()
        wait_for(lambda: _state(storage, rec.id) == "done")
        job = storage.get_job(job_id=rec.id)
        assert job.error is None and job.attempts == 2 and int(_starts(rec)[3]) >= 1
        runner.stop()

    def test_missing_program(self, storage, settings):
        """A train command that cannot start fails the job with the reason."""
        runner = _runner(storage, settings, train_command=["/nonexistent/placer-train"])
        rec = _submit(runner)
        job = storage.get_job(job_id=rec.id)
        assert job.state == "failed" and "cannot start" in job.error
        runner.stop()

    def test_kill_after_stop_timeout(self, storage, settings, monkeypatch):
        """A trainer that ignores SIGTERM is killed after job_stop_seconds."""
        monkeypatch.setenv("FAKE_TRAIN_IGNORE_TERM", "1")
        runner = _runner(storage, settings, job_stop_seconds=0.5)
        rec = _submit(runner)
        wait_for(lambda: Path(rec.job_dir, "progress.json").exists())
        runner.cancel(rec.id)
        wait_for(lambda: _state(storage, rec.id) == "cancelled", timeout=10)
        runner.stop()

    @pytest.mark.parametrize("niceness", [10, 0])
    def test_training_runs_nicer_than_the_service(self, storage, settings, hold, niceness):
        """A job's process runs `job_niceness` below the service, so answers given at once keep the CPU;
        0 leaves it at the service's own."""
        runner = _runner(storage, settings, job_niceness=niceness)
        rec = _submit(runner)
        wait_for(lambda: Path(rec.job_dir, "progress.json").exists())
        pid = storage.get_job(job_id=rec.id).pid
        own = os.getpriority(os.PRIO_PROCESS, 0)
        assert os.getpriority(os.PRIO_PROCESS, pid) == min(own + niceness, 19)
        runner.cancel(rec.id)
        wait_for(lambda: _state(storage, rec.id) == "cancelled", timeout=10)
        runner.stop()

    def test_stop_then_resume(self, storage, settings, hold):
        """A service stop interrupts running jobs; the next start resumes them with --resume."""
        runner = _runner(storage, settings)
        rec = _submit(runner, budget=0.3)  # held past its budget until the stop
        wait_for(lambda: (JobRunner.progress(rec) or {}).get("step", 0) >= 2)
        runner.stop()
        stopped = storage.get_job(job_id=rec.id)
        assert stopped.state == "interrupted" and stopped.resume and "resumes" in stopped.error
        step_at_stop = JobRunner.progress(rec)["step"]
        hold.unlink()  # the resumed run may end
        runner = _runner(storage, settings)
        wait_for(lambda: _state(storage, rec.id) == "done")
        assert _starts(rec)[:2] == ["start", "0"] and _starts(rec)[2] == "resume"
        assert int(_starts(rec)[3]) == step_at_stop
        assert storage.get_job(job_id=rec.id).attempts == 2
        runner.stop()

    def test_a_resume_that_fails_at_once_is_failed_with_its_reason(self, storage, settings, hold, monkeypatch):
        """The stopped attempt's progress.json still says "interrupted" when the resumed process fails before
        writing its own (a corrupt checkpoint): the exit code decides, and the log says why."""
        runner = _runner(storage, settings)
        rec = _submit(runner, budget=0.3)
        wait_for(lambda: (JobRunner.progress(rec) or {}).get("step", 0) >= 2)
        runner.stop()
        assert storage.get_job(job_id=rec.id).state == "interrupted"
        monkeypatch.setenv("FAKE_TRAIN_FAIL_ON_RESUME", "1")
        runner = _runner(storage, settings)
        wait_for(lambda: _state(storage, rec.id) == "failed")
        err = storage.get_job(job_id=rec.id).error
        assert "exited with code 1" in err and "trainer state 'trainer_state.json': not valid JSON" in err, err
        runner.stop()

    def test_crash_recovery(self, storage, settings):
        """After a crash (job left "running", its process still alive) the orphan is stopped and resumed."""
        runner = _runner(storage, settings)
        rec = _submit(runner, budget=2.0)
        wait_for(lambda: (JobRunner.progress(rec) or {}).get("step", 0) >= 1)
        orphan = runner._procs.pop(rec.id)  # forget it, as a crashed service would
        _crash(runner)
        assert _state(storage, rec.id) == "running"
        runner = _runner(storage, settings)
        assert orphan.wait(timeout=5) == 130  # stopped by SIGTERM, after checkpointing (as placer train exits)
        wait_for(lambda: _state(storage, rec.id) == "done")
        assert "resume" in _starts(rec)
        runner.stop()

    def test_dead_orphan_is_resumed(self, storage, settings):
        """A job left "running" whose process is gone is resumed, never left running."""
        runner = _runner(storage, settings)
        rec = _submit(runner, budget=1.0)
        wait_for(lambda: (JobRunner.progress(rec) or {}).get("step", 0) >= 1)
        proc = runner._procs.pop(rec.id)
        _crash(runner)
        proc.kill()
        proc.wait()
        runner = _runner(storage, settings)
        wait_for(lambda: _state(storage, rec.id) == "done")
        runner.stop()

    def test_gives_up_after_max_starts(self, storage, settings):
        """A job that keeps being interrupted is failed after MAX_STARTS starts, with the reason."""
        runner = _runner(storage, settings)
        rec = _submit(runner)
        runner.stop()
        storage.update_job(job_id=rec.id, attempts=5, state="interrupted", resume=True)
        runner = _runner(storage, settings)
        job = storage.get_job(job_id=rec.id)
        assert job.state == "failed" and "gave up after 5 starts" in job.error
        runner.stop()


class TestSharedDataDir:
    """Two service processes on one data dir (uvicorn workers): one owns the jobs, the other follows."""

    def test_one_owner_and_takeover(self, storage, settings, hold):
        owner = _runner(storage, settings)
        follower = _runner(open_storage(settings.database_url), settings)
        assert owner.owner and not follower.owner
        rec = _submit(follower, budget=60)  # recorded by the follower, started by the owner
        wait_for(lambda: rec.id in owner._procs)  # claimed ("running") just before its process starts
        assert _state(storage, rec.id) == "running" and follower.running_count() == 1
        follower.cancel(rec.id)
        wait_for(lambda: _state(storage, rec.id) == "cancelled")

        second = _submit(follower, budget=0.3)  # held past its budget until the owner stops
        wait_for(lambda: (JobRunner.progress(second) or {}).get("step", 0) >= 1)
        owner.stop()  # the owner goes away: its job is interrupted, the follower takes over and resumes it
        hold.unlink()  # the resumed run may end
        wait_for(lambda: follower.owner, timeout=10)
        wait_for(lambda: _state(storage, second.id) == "done")
        assert _starts(second)[2] == "resume"
        follower.stop()
        follower.storage.close()

    def test_cancel_racing_the_end_of_the_job(self, storage, settings, hold):
        """A DELETE that reads "running" just before the owner records the job done leaves it done, not
        "cancelling" forever (the owner has no process left to stop)."""
        owner = _runner(storage, settings)
        follower = _runner(_StaleReads(open_storage(settings.database_url)), settings)
        rec = _submit(follower, budget=0.3)
        wait_for(lambda: _state(storage, rec.id) == "running")  # held: it cannot end before this is seen
        hold.unlink()
        # the cancel has read "running" (its queued -> cancelled change missed); the job ends before it
        # writes running -> cancelling
        follower.storage.hold_until = lambda: _state(storage, rec.id) == "done"
        follower.storage.hold_if_state = ("running",)
        follower.cancel(rec.id)
        time.sleep(0.5)  # the owner's polls: nothing changes a job left "cancelling"
        assert _state(storage, rec.id) == "done"
        owner.stop()
        follower.stop()
        follower.storage.close()

    def test_cancel_racing_the_start_of_the_job(self, storage, settings, hold):
        """A DELETE that reads "queued" just before the owner starts the job stops the process it started:
        the job never answers "cancelled" while its process runs on to "done"."""
        owner = _runner(storage, settings)
        follower = _runner(_StaleReads(open_storage(settings.database_url)), settings)
        # the second waits for a slot; held, it cannot run on to "done" before the cancel is recorded
        first, second = _submit(owner, budget=60), _submit(owner, budget=0.3)
        wait_for(lambda: _state(storage, first.id) == "running")
        follower.storage.hold_until = lambda: _state(storage, second.id) == "running"  # it starts meanwhile
        cancel = threading.Thread(target=follower.cancel, args=(second.id,))
        cancel.start()
        owner.cancel(first.id)  # frees the slot: the owner starts the second job
        cancel.join()
        hold.unlink()  # from here a process the cancel missed runs on to "done"
        wait_for(lambda: _state(storage, second.id) in ("done", "cancelled") and not owner._procs)
        assert _state(storage, second.id) == "cancelled"
        owner.stop()
        follower.stop()
        follower.storage.close()


class _StaleReads:
    """Storage whose next job read or write is overtaken by another service process: a `get_job` returns
    what it read once `hold_until()` holds, an `update_job` waits for it before it writes (only one
    conditional on `hold_if_state`, when that is set)."""

    def __init__(self, storage):
        self._storage = storage
        self.hold_until = None
        self.hold_if_state = None

    def __getattr__(self, name):
        return getattr(self._storage, name)

    def _hold(self):
        if self.hold_until is not None:
            wait_for(self.hold_until, timeout=10)
            self.hold_until = None

    def get_job(self, **kw):
        record = self._storage.get_job(**kw)
        self._hold()
        return record

    def update_job(self, **kw):
        if self.hold_if_state is None or kw.get("if_state") == self.hold_if_state:
            self._hold()
        return self._storage.update_job(**kw)


def test_the_guard_sets_the_parent_death_signal_then_becomes_the_command():
    """The training command runs in the guard's process (same pid) with SIGTERM as its parent-death signal."""
    import sys

    from service.job_processes import dying_with_the_service

    if not sys.platform.startswith("linux"):
        pytest.skip("Linux only")
    probe = ("import ctypes, os; v = ctypes.c_int(); ctypes.CDLL(None).prctl(2, ctypes.byref(v), 0, 0, 0); "
             "print(v.value, os.getpid())")
    proc = subprocess.Popen(dying_with_the_service([sys.executable, "-c", probe]), stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate(timeout=60)
    assert out.split() == ["15", str(proc.pid)]


def test_jobs_start_without_a_preexec_fn(storage, settings, monkeypatch):
    """With a preexec_fn Python forks (not vfork), running the libraries' fork handlers: OpenBLAS's joins its
    threads there, and starting a job deadlocked the service now and then."""

    seen = []
    real = subprocess.Popen

    def popen(*args, **kwargs):
        seen.append(kwargs.get("preexec_fn"))
        return real(*args, **kwargs)

    monkeypatch.setattr("service.jobs.subprocess.Popen", popen)
    runner = _runner(storage, settings)
    rec = _submit(runner, budget=0.2)
    wait_for(lambda: _state(storage, rec.id) == "done")
    assert seen == [None]


def test_retry_after_is_the_time_left_of_the_running_job_nearest_its_end(storage, settings, hold):
    """A 429's Retry-After: the least budget left among running jobs (by their progress), within its bounds."""
    from service.jobs import RETRY_AFTER_BOUNDS

    runner = _runner(storage, settings)
    assert runner.retry_after() == RETRY_AFTER_BOUNDS[0]  # nothing runs: a slot is about to be taken
    rec = _submit(runner, budget=50.0)
    wait_for(lambda: _state(storage, rec.id) == "running" and Path(rec.job_dir, "progress.json").exists())
    wait_for(lambda: json.loads(Path(rec.job_dir, "progress.json").read_text())["elapsed_seconds"] > 0)
    elapsed = json.loads(Path(rec.job_dir, "progress.json").read_text())["elapsed_seconds"]
    assert 1 <= runner.retry_after() <= 50 - int(elapsed)
    runner.stop()
