"""`placer train`: the files the service reads, resume, signals, errors."""

import csv
import json
import os
import signal
import subprocess
import sys
import time
from unittest.mock import ANY

import pytest

from placer.placement import Placement

FAST = ["--samples", "8", "--groups", "12", "--warm-start", "none", "--init", "none"]
"""A small run from scratch (the contract files, resume and signals are the same for a fine-tune)."""


@pytest.fixture(autouse=True)
def _no_xla(monkeypatch):
    """Tiny graphs: plain graph mode traces faster than XLA compiles (same results)."""
    from placer.rl import trainer

    monkeypatch.setattr(trainer.TrainConfig, "jit", False)


@pytest.fixture
def graph_file(layered_graph_file):
    return layered_graph_file(40, seed=1)


def test_train_writes_the_contract_files_and_resumes(cli, graph_file, tmp_path):
    out = tmp_path / "run"
    r = cli("train", graph_file, "--cluster", "2gpu", "--out", out, "--steps", "3", "--seed", "2", *FAST, "--json")
    assert r.code == 0, r.err
    summary = json.loads(r.out)
    assert summary["state"] == "done" and summary["step"] == 3 and summary["samples"] == 24
    for name in ("best_placement.json", "history.csv", "curve.png", "progress.json", "trainer_state.json"):
        assert (out / name).exists(), name
    progress = json.loads((out / "progress.json").read_text())
    assert progress["state"] == "done" and progress["step"] == 3 and progress["error"] is None
    assert set(progress) == {"state", "step", "samples", "elapsed_seconds", "budget_seconds", "best_step_time",
                             "mean_reward", "entropy", "error"}
    best = Placement.from_dict(json.loads((out / "best_placement.json").read_text()))
    assert best.method == "rl" and len(best.devices) == 40 and best.step_time == progress["best_step_time"]
    assert best.meta["steps"] == 3 and best.meta["warm_start"] == {"method": "none"}

    again = cli("train", graph_file, "--cluster", "2gpu", "--out", out, "--steps", "3")
    assert again.code == 1 and "--resume" in again.err
    conflict = cli("train", graph_file, "--cluster", "2gpu", "--out", out, "--steps", "5", "--resume", "--seed", "9")
    assert conflict.code == 1 and "seed" in conflict.err

    r = cli("train", graph_file, "--cluster", "2gpu", "--out", out, "--steps", "5", "--resume")
    assert r.code == 0, r.err
    lines = (out / "history.csv").read_text().splitlines()
    assert [int(line.split(",")[0]) for line in lines[1:]] == [1, 2, 3, 4, 5]
    progress = json.loads((out / "progress.json").read_text())
    assert progress["step"] == 5 and progress["mean_reward"] is not None

    r = cli("train", graph_file, "--cluster", "2gpu", "--out", out, "--steps", "5", "--resume")
    assert r.code == 0, r.err  # a finished run resumed: no step taken, its last step's figures kept
    assert json.loads((out / "progress.json").read_text()) == {**progress, "elapsed_seconds": ANY}


def test_refine_seconds_writes_a_refined_placement_never_slower(cli, graph_file, tmp_path):
    out = tmp_path / "run"
    r = cli("train", graph_file, "--cluster", "4gpu", "--out", out, "--steps", "2", *FAST, "--refine-seconds", "3",
            "--json")
    assert r.code == 0, r.err
    summary = json.loads(r.out)
    best = Placement.from_dict(json.loads((out / "best_placement.json").read_text()))
    refined = Placement.from_dict(json.loads((out / "refined_placement.json").read_text()))
    assert refined.step_time <= best.step_time and summary["refined_step_time"] == refined.step_time
    assert refined.meta["refined"]["start_step_time"] == pytest.approx(best.step_time)
    assert refined.meta["steps"] == 2  # the training's meta is kept


@pytest.mark.parametrize("argv, message", [
    (["--refine-seconds", "0"], "--refine-seconds must be a positive, finite number"),
    (["--refine-seconds", "1", "--objective", "throughput"], "--refine-seconds refines step time"),
    (["--refine-seconds", "1", "--refine-sweeps", "0"], "--refine-sweeps must be at least 1"),
    (["--warm-start-search", "-1"], "--warm-start-search must be a non-negative number of seconds"),
    (["--warm-start-search", "1", "--warm-start", "none", "--init", "none"], "not --warm-start none"),
    (["--warm-start-search", "1", "--init", "shipped"], "with --init, add --warm-start heuristic"),
    (["--warm-start-search", "1"], "fine-tuning (the default, --init shipped), add --warm-start heuristic"),
    (["--warm-start-search", "1", "--objective", "throughput"], "improves step time"),
    (["--starts", "9"], "--starts must be 1 to 8"),
    (["--starts", "0"], "--starts must be 1 to 8"),
    (["--starts", "2", "--init", "shipped"], "does not go with --init"),
    (["--starts", "2", "--warm-start", "none"], "does not go with --warm-start none"),
    (["--starts", "2", "--reward", "measured"], "does not go with --reward measured"),
    (["--kind-groups", "--init", "shipped"], "--kind-groups does not go with --init"),
    (["--balanced-groups", "--init", "shipped"], "--balanced-groups does not go with --init"),
    (["--no-kind-groups", "--init", "shipped"], "--no-kind-groups does not go with --init"),
    (["--steps", "0"], "--steps must be at least 1"),
    (["--budget-seconds", "-3"], "--budget-seconds must be positive"),
    (["--samples", "1", "--steps", "1"], "--samples must be an integer of at least 2"),
    (["--ray-workers", "2"], "--ray-workers goes with --ray"),
    (["--world-sigma", "-1"], "--world-sigma must be a non-negative number"),
    (["--world-sigma", "0.3", "--reward", "measured"], "does not go with --reward measured"),
    (["--world-sigma", "0.3", "--objective", "throughput"], "world_sigma draws worlds of step times"),
    (["--ray-workers", "0", "--ray", "auto"], "--ray-workers must be at least 1, got 0"),
])
def test_bad_options_are_one_line_errors(cli, graph_file, tmp_path, argv, message):
    r = cli("train", graph_file, "--cluster", "2gpu", "--out", tmp_path / "o", *argv)
    assert r.code == 1 and message in r.err and "Traceback" not in r.err


@pytest.mark.parametrize("flag, searched", [([], False), (["--warm-start-search", "1"], True),
                                           (["--warm-start-search", "0"], False)])
def test_the_heuristic_warm_start_is_searched_first_when_asked(cli, graph_file, tmp_path, flag, searched):
    out = tmp_path / "run"
    r = cli("train", graph_file, "--cluster", "4gpu", "--out", out, "--steps", "1", "--samples", "8", "--groups", "12",
            "--init", "none", *flag, "--json")
    assert r.code == 0, r.err
    warm = json.loads((out / "best_placement.json").read_text())["meta"]["warm_start"]
    assert warm["heuristic"].endswith("+search") == searched and json.loads(r.out)["warm_start"] == warm
    config = json.loads((out / "trainer_state.json").read_text())["config"]
    assert config["warm_start_search"] == (float(flag[1]) if flag else 0.0)


def test_kind_and_balanced_groups_are_the_default_and_kept_by_the_run_and_its_resume(cli, graph_file, tmp_path):
    on, off = tmp_path / "on", tmp_path / "off"
    assert cli("train", graph_file, "--cluster", "4gpu", "--out", on, "--steps", "1", *FAST).code == 0
    r = cli("train", graph_file, "--cluster", "4gpu", "--out", off, "--steps", "1", *FAST, "--no-kind-groups",
            "--no-balanced-groups")
    assert r.code == 0, r.err
    config = lambda out: json.loads((out / "trainer_state.json").read_text())["config"]  # noqa: E731
    assert config(on)["kind_groups"] and config(on)["balanced_groups"] and not config(on)["critical_groups"]
    assert not config(off)["kind_groups"] and not config(off)["balanced_groups"]
    r = cli("train", graph_file, "--cluster", "4gpu", "--out", off, "--steps", "2", "--resume")
    assert r.code == 0, r.err
    assert not config(off)["kind_groups"] and not config(off)["balanced_groups"]
    r = cli("train", graph_file, "--cluster", "4gpu", "--out", off, "--steps", "3", "--resume", "--kind-groups")
    assert r.code == 1 and "cannot resume with kind_groups=True" in r.err


def test_a_run_saved_before_the_grouping_defaults_resumes_on_heavy_edge_groups(cli, graph_file, tmp_path):
    """A trainer_state.json without the grouping fields was trained on heavy-edge groups; it must not resume on
    the groups of today's defaults (its checkpoint holds one decision per group)."""
    out = tmp_path / "old"
    r = cli("train", graph_file, "--cluster", "4gpu", "--out", out, "--steps", "1", *FAST, "--no-kind-groups",
            "--no-balanced-groups")
    assert r.code == 0, r.err
    state_file = out / "trainer_state.json"
    state = json.loads(state_file.read_text())
    for key in ("kind_groups", "balanced_groups", "critical_groups"):
        del state["config"][key]
    state_file.write_text(json.dumps(state))
    r = cli("train", graph_file, "--cluster", "4gpu", "--out", out, "--steps", "2", "--resume", "--json")
    assert r.code == 0, r.err
    config = json.loads(state_file.read_text())["config"]
    assert not config["kind_groups"] and not config["balanced_groups"] and json.loads(r.out)["step"] == 2


def test_starts_races_heuristic_warm_starts_and_resumes(cli, graph_file, tmp_path):
    out = tmp_path / "race"
    argv = ["train", graph_file, "--cluster", "4gpu", "--out", out, "--samples", "8", "--groups", "12"]
    r = cli(*argv, "--steps", "12", "--starts", "3", "--json")
    assert r.code == 0, r.err
    assert "--starts trains from scratch" in r.err
    summary = json.loads(r.out)
    assert summary["state"] == "done" and summary["step"] == 12 and summary["samples"] == 96
    assert (out / "race_state.json").exists() and not (out / "trainer_state.json").exists()
    assert all((out / "starts" / str(i) / "trainer_state.json").exists() for i in range(3))
    best = Placement.from_dict(json.loads((out / "best_placement.json").read_text()))
    starts = best.meta["race"]["starts"]
    assert len(starts) == 3 and sum(s["steps"] for s in starts) == 12
    assert best.step_time == min(s["best_step_time"] for s in starts) == summary["best_step_time"]
    assert json.loads((out / "progress.json").read_text())["step"] == 12

    r = cli(*argv, "--steps", "20", "--starts", "2", "--resume")
    assert r.code == 1 and "races 3 starts" in r.err
    r = cli(*argv, "--steps", "20", "--resume")
    assert r.code == 0, r.err
    assert "raced warm starts: " in r.out and "dropped after round 1" in r.out
    lines = (out / "history.csv").read_text().splitlines()
    assert [int(line.split(",")[0]) for line in lines[1:]] == list(range(1, 21))

    plain = tmp_path / "plain"
    assert cli("train", graph_file, "--cluster", "4gpu", "--out", plain, "--steps", "1", *FAST).code == 0
    r = cli("train", graph_file, "--cluster", "4gpu", "--out", plain, "--steps", "2", "--starts", "2", "--resume")
    assert r.code == 1 and "resume it without --starts" in r.err


def test_resume_groups_ops_as_the_run_began(cli, graph_file, tmp_path, monkeypatch):
    """The heuristic warm start shapes the op groups; on resume the heuristics may answer otherwise (a time cap
    may cut one short), so the run keeps the one it began with and its best placement stays the one it scored."""
    import numpy as np

    from placer.rl.trainer import Trainer

    out = tmp_path / "run"
    argv = ["train", graph_file, "--cluster", "4gpu", "--out", out, "--samples", "8", "--groups", "12", "--init",
            "none"]
    assert cli(*argv, "--steps", "2").code == 0
    before = json.loads((out / "best_placement.json").read_text())
    monkeypatch.setattr(Trainer, "_best_heuristic", lambda self: (
        "round_robin", np.arange(len(self.graph)) % len(self.cluster), 1.0))
    r = cli(*argv, "--steps", "3", "--resume")
    assert r.code == 0, r.err
    after = json.loads((out / "best_placement.json").read_text())
    assert after["meta"]["warm_start"]["heuristic"] == before["meta"]["warm_start"]["heuristic"]
    assert after["step_time"] <= before["step_time"]
    if after["meta"]["found_at_step"] == before["meta"]["found_at_step"]:
        assert after["devices"] == before["devices"]


def test_sigterm_checkpoints_and_marks_interrupted(graph_file, tmp_path):
    """The service stops jobs with SIGTERM: the run saves, says 'interrupted', and can resume."""
    out = tmp_path / "run"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    cmd = [sys.executable, "-m", "placer.cli.main", "train", str(graph_file), "--cluster", "2gpu",
           "--out", str(out), "--budget-seconds", "300", "--seed", "1", "--samples", "8", "--groups", "12",
           "--warm-start", "none"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        p = out / "progress.json"
        if p.exists() and json.loads(p.read_text())["step"] >= 2:
            break
        time.sleep(0.2)
    has_result = (out / "best_placement.json").exists()  # a job's result before the first checkpoint (30 s)
    assert not (out / "trainer_state.json").exists()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err.decode()
    progress = json.loads((out / "progress.json").read_text())
    assert progress["state"] == "interrupted" and progress["step"] >= 2
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["state"]["step"] == progress["step"]
    assert (out / "best_placement.json").exists() and has_result
    assert b"Traceback" not in err


def test_resume_on_another_graph_is_refused_before_the_run_is_touched(cli, graph_file, layered_graph_file, tmp_path):
    """Another graph would fail deep in the trainer; the run's files (progress.json too) stay as they were."""
    out = tmp_path / "run"
    assert cli("train", graph_file, "--cluster", "2gpu", "--out", out, "--steps", "1", *FAST).code == 0
    progress = (out / "progress.json").read_text()
    bigger = layered_graph_file(50, seed=1, name="bigger.json.gz")
    r = cli("train", bigger, "--cluster", "2gpu", "--out", out, "--steps", "2", "--resume")
    assert r.code == 1 and "it has graph 'layered40' (40 ops), this one 'layered50' (50 ops)" in r.err
    same_size = layered_graph_file(40, seed=2, name="other.json.gz")  # same name and op count, other ops
    r = cli("train", same_size, "--cluster", "2gpu", "--out", out, "--steps", "2", "--resume")
    assert r.code == 1 and "another graph named 'layered40'" in r.err
    r = cli("train", graph_file, "--cluster", "4gpu", "--out", out, "--steps", "2", "--resume")
    assert r.code == 1 and "it has cluster '2gpu'" in r.err
    assert (out / "progress.json").read_text() == progress and "Traceback" not in r.err


def test_resume_with_no_run_is_an_error_unless_one_was_begun(cli, graph_file, tmp_path):
    """--resume on an empty folder would silently start afresh; a run begun but stopped before its first
    checkpoint (progress.json only, as the service resumes its jobs) starts again with a note."""
    r = cli("train", graph_file, "--cluster", "2gpu", "--out", tmp_path / "none", "--steps", "1", "--resume")
    assert r.code == 1 and "no training run to resume in" in r.err and "drop --resume" in r.err
    assert not (tmp_path / "none").exists()
    begun = tmp_path / "begun"
    begun.mkdir()
    (begun / "progress.json").write_text('{"state": "running", "step": 0}')
    r = cli("train", graph_file, "--cluster", "2gpu", "--out", begun, "--steps", "1", "--resume", *FAST)
    assert r.code == 0, r.err
    assert "stopped before its first checkpoint; starting it again" in r.err
    assert json.loads((begun / "progress.json").read_text())["state"] == "done"


@pytest.mark.parametrize("argv", [["--samples", "0"], ["--seed", "-1"], ["--groups", "0"], ["--steps", "0"],
                                  ["--init", "no-such-policy"],
                                  ["--reward", "measured"]])  # a graph without its GraphDef: said before any work
def test_bad_options_leave_no_folder_behind(cli, graph_file, tmp_path, argv):
    r = cli("train", graph_file, "--cluster", "2gpu", "--out", tmp_path / "o", *argv)
    assert r.code == 1 and len(r.err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_init_with_groups_fine_tunes_at_those_groups_and_resumes(cli, graph_file, tmp_path):
    """--groups reaches a fine-tune (the policy's G was kept, silently), so the same flags resume it (the
    service resumes a job with the flags it began with: that was refused, 'trained with groups=128')."""
    out = tmp_path / "run"
    flags = ["--init", "shipped", "--groups", "8", "--samples", "4"]
    r = cli("train", graph_file, "--cluster", "2gpu", "--out", out, "--steps", "1", *flags)
    assert r.code == 0, r.err
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["config"]["groups"] == 8 and state["state"]["warm_start"]["policy"]["groups"] == 8
    r = cli("train", graph_file, "--cluster", "2gpu", "--out", out, "--steps", "2", *flags, "--resume")
    assert r.code == 0, r.err


def test_resume_with_init_must_name_the_policy_the_run_fine_tunes(cli, graph_file, tmp_path):
    """--init on --resume was ignored: a missing folder, or a run trained from scratch, resumed silently."""
    tuned, scratch = tmp_path / "tuned", tmp_path / "scratch"
    assert cli("train", graph_file, "--cluster", "2gpu", "--out", tuned, "--steps", "1", "--init", "shipped",
               "--groups", "8", "--samples", "4").code == 0
    assert cli("train", graph_file, "--cluster", "2gpu", "--out", scratch, "--steps", "1", *FAST).code == 0
    r = cli("train", graph_file, "--cluster", "2gpu", "--out", tuned, "--steps", "2", "--resume", "--init", tmp_path)
    assert r.code == 1 and "is not a policy folder" in r.err
    r = cli("train", graph_file, "--cluster", "2gpu", "--out", scratch, "--steps", "2", "--resume", "--init", "shipped")
    assert r.code == 1 and "trains from scratch" in r.err and "without --init" in r.err
    assert json.loads((scratch / "progress.json").read_text())["step"] == 1  # refused before the run is touched
    r = cli("train", graph_file, "--cluster", "2gpu", "--out", tuned, "--steps", "2", "--resume")
    assert r.code == 0, r.err


def test_an_interrupt_during_the_final_refine_marks_the_run_interrupted(cli, graph_file, tmp_path, monkeypatch):
    """Ctrl-C in --refine-seconds' search left progress.json "running" for good (the service read a failure)."""
    from placer.placers import refine

    search = refine.refine

    def interrupted_search(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(refine, "refine", interrupted_search)
    out = tmp_path / "run"
    r = cli("train", graph_file, "--cluster", "2gpu", "--out", out, "--steps", "2", *FAST, "--refine-seconds", "5")
    assert r.code == 130
    progress = json.loads((out / "progress.json").read_text())
    assert progress["state"] == "interrupted" and progress["step"] == 2
    assert not (out / "refined_placement.json").exists()
    monkeypatch.setattr(refine, "refine", search)
    r = cli("train", graph_file, "--cluster", "2gpu", "--out", out, "--steps", "2", "--refine-seconds", "1",
            "--resume")
    assert r.code == 0, r.err
    assert json.loads((out / "progress.json").read_text())["state"] == "done"
    assert (out / "refined_placement.json").exists()


def test_a_run_stopped_before_its_first_step_reports_its_floor(cli, graph_file, tmp_path, monkeypatch):
    """Ctrl-C before the first step of a cold start: REINFORCE has no best yet, but the run answers the best
    heuristic (its floor), so result.json and --json name it, as best_placement.json does."""
    from placer.rl.trainer import Trainer

    real = Trainer.warm_start

    def interrupted(self, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Trainer, "warm_start", interrupted)
    out = tmp_path / "run"
    r = cli("train", graph_file, "--cluster", "2gpu", "--out", out, "--steps", "2", *FAST, "--json")
    assert r.code == 130, r.err
    summary = json.loads(r.out)
    result = json.loads((out / "result.json").read_text())
    placed = json.loads((out / "best_placement.json").read_text())
    assert summary["best_step_time"] == result["step_time"] == pytest.approx(placed["step_time"])
    assert result["state"] == "interrupted"


@pytest.mark.parametrize("during, saved_step", [("update", 3), ("score", 2)])
def test_a_second_ctrl_c_in_a_step_saves_a_checkpoint_a_resume_continues_exactly(cli, graph_file, tmp_path,
                                                                                 monkeypatch, during, saved_step):
    """Two Ctrl-C in step 3: while its gradient step changes the weights, the step ends first and is saved
    (the weights were saved one step ahead of the step count, so the resume redrew step 3 from other weights);
    while its samples are simulated, it stops at once with step 2 saved. Either way the resumed run's history
    is the uninterrupted run's."""
    from placer.rl.trainer import Trainer

    argv = [graph_file, "--cluster", "2gpu", *FAST, "--seed", "2", "--steps", "6"]
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    assert cli("train", *argv, "--out", whole).code == 0
    real = getattr(Trainer, during)

    def then_two_ctrl_c(self, *args, **kwargs):
        result = real(self, *args, **kwargs)
        if self.state.step == 2:  # in step 3
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)
        return result

    monkeypatch.setattr(Trainer, during, then_two_ctrl_c)
    r = cli("train", *argv, "--out", cut)
    monkeypatch.setattr(Trainer, during, real)
    assert r.code == 130, r.err
    assert json.loads((cut / "trainer_state.json").read_text())["state"]["step"] == saved_step
    assert json.loads((cut / "progress.json").read_text())["state"] == "interrupted"
    r = cli("train", *argv, "--out", cut, "--resume")
    assert r.code == 0, r.err

    def rows(run):
        timing = {"elapsed_seconds", "samples_per_second"}
        with open(run / "history.csv", newline="") as f:
            return [{k: v for k, v in row.items() if k not in timing} for row in csv.DictReader(f)]

    assert len(rows(whole)) == 6 and rows(cut) == rows(whole)


def test_a_short_budget_trains_without_xla(cli, graph_file, tmp_path, monkeypatch):
    """Under XLA_MIN_BUDGET_SECONDS the run does not compile with XLA: the service's default 60 s job on
    inception_v3 spent its budget compiling and took one REINFORCE step (#41)."""
    from placer.rl import trainer

    monkeypatch.setattr(trainer.TrainConfig, "jit", None)  # the default, which the autouse fixture replaced
    out = tmp_path / "run"
    r = cli("train", graph_file, "--cluster", "2gpu", "--out", out, "--budget-seconds", "60", "--steps", "1", *FAST)
    assert r.code == 0, r.err
    assert json.loads((out / "trainer_state.json").read_text())["config"]["jit"] is False


def test_a_new_run_fine_tunes_the_shipped_policy_and_says_which_start_it_kept(cli, graph_file, tmp_path):
    """By default a run starts from the shipped policy's zero-shot answer, runs the heuristics too (a line
    each), and answers the fastest of them and training, saying which in its output and result.json."""
    out = tmp_path / "run"
    r = cli("train", graph_file, "--cluster", "2gpu", "--out", out, "--steps", "1", "--samples", "4")
    assert r.code == 0, r.err
    assert "kept " in r.out and "zero-shot" in r.out and "result.json" in r.out
    assert "  heuristic heft: " in r.err and " ms, placed in " in r.err  # each heuristic shown as it finishes
    result = json.loads((out / "result.json").read_text())
    times = result["step_times"]
    assert result["state"] == "done" and result["step"] == 1 and result["why"]
    assert times["zero_shot"] is not None and times["heuristic"] is not None and times["trained"] is not None
    assert result["step_time"] <= min(times.values()) + 1e-12
    kept = {"zero-shot": times["zero_shot"], "trained": times["trained"],
            f"heuristic:{result['heuristic']}": times["heuristic"]}[result["kept"]]
    assert result["step_time"] == pytest.approx(kept)
    best = json.loads((out / "best_placement.json").read_text())
    assert best["meta"]["warm_start"]["method"] == "policy" and best["meta"]["kept"]["kept"] == result["kept"]
    assert {"entropy", "entropy_weight"} <= set(next(csv.DictReader(open(out / "history.csv"))))

    r = cli("train", graph_file, "--cluster", "2gpu", "--out", out, "--steps", "2", "--resume", "--init", "none")
    assert r.code == 1 and "fine-tunes a policy" in r.err


def test_a_folder_another_run_is_using_is_refused(cli, graph_file, tmp_path, monkeypatch):
    """Two runs writing one folder damaged it (a history line cut in two, one best placement over the other's):
    a run locks its folder; another waits CLAIM_WAIT_SECONDS for it, then stops naming the holder."""
    import os

    from placer.cli import common

    out = tmp_path / "same"
    out.mkdir()
    held = common.claim_run_folder(out, "training run")  # as a run in another process would
    monkeypatch.setattr(common, "CLAIM_WAIT_SECONDS", 0.5)
    r = cli("train", graph_file, "--cluster", "2gpu", "--budget-seconds", "5", "--out", out)
    assert r.code == 1 and r.err.count("\n") == 1, r.err
    assert f"is in use by another training run (process {os.getpid()})" in r.err
    assert not (out / "progress.json").exists()
    held.close()  # the other run ends: the folder is free
    r = cli("train", graph_file, "--cluster", "2gpu", "--steps", "2", "--out", out)
    assert r.code == 0, r.err


def test_a_resume_from_damaged_checkpoint_files_says_so(cli, graph_file, tmp_path):
    """The trainer state names checkpoint files that are gone or cut short: one line saying so and what to do,
    not only the exception's class (IndexError, NotFoundError)."""
    import shutil

    out = tmp_path / "run"
    assert cli("train", graph_file, "--cluster", "2gpu", "--out", out, "--steps", "2", *FAST).code == 0
    for f in (out / "checkpoint").glob("*.data-*"):
        f.write_bytes(f.read_bytes()[:10])
    r = cli("train", graph_file, "--cluster", "2gpu", "--out", out, "--steps", "4", *FAST, "--resume")
    assert r.code == 1 and r.err.count("\n") == 1, r.err
    assert "are missing or damaged" in r.err and "start a new one with another --out" in r.err
    shutil.rmtree(out / "checkpoint")
    r = cli("train", graph_file, "--cluster", "2gpu", "--out", out, "--steps", "4", *FAST, "--resume")
    assert r.code == 1 and "are missing or damaged" in r.err, r.err


def test_a_resume_without_the_trainer_state_beside_its_checkpoint_says_why_it_starts_again(cli, graph_file,
                                                                                             tmp_path):
    """Checkpoint files without the state that names them (a run cut off as it saved): the run starts again,
    saying so, where the note said it had stopped before its first checkpoint."""
    out = tmp_path / "run"
    assert cli("train", graph_file, "--cluster", "2gpu", "--out", out, "--steps", "2", *FAST).code == 0
    (out / "trainer_state.json").unlink()
    r = cli("train", graph_file, "--cluster", "2gpu", "--out", out, "--steps", "2", *FAST, "--resume")
    assert r.code == 0 and "was cut off as it saved a checkpoint" in r.err, r.err
    assert "before its first checkpoint" not in r.err
