"""`bench/bench_pretrain.py`: bad settings, and results kept from other settings, are refused before any work."""

import json
import sys
from pathlib import Path

import pytest

from bench import bench_pretrain
from placer.errors import PlacerError


def run(monkeypatch, *argv):
    monkeypatch.setattr(sys, "argv", ["bench_pretrain.py", "--stages", "heuristics", "rl", *argv])
    return bench_pretrain.main()


@pytest.mark.parametrize("argv, message", [
    (["--only", "rnnlm", "nosuch"], "--only: no graph labelled nosuch"),
    (["--rl-budget", "-1"], "--rl-budget must be positive, got -1"),
    (["--best-of", "0"], "--best-of must be at least 1, got 0"),
    (["--cluster", "9gpu"], "unknown cluster preset '9gpu'"),
])
def test_bad_settings_are_refused(monkeypatch, tmp_path, argv, message):
    """An unknown --only label ran nothing and printed the old table, exit 0."""
    with pytest.raises(PlacerError, match=message):
        run(monkeypatch, "--out", str(tmp_path / "p.json"), *argv)
    assert not (tmp_path / "p.json").exists()


def test_out_in_a_missing_folder_is_refused_not_made(monkeypatch, tmp_path):
    with pytest.raises(PlacerError, match="does not exist"):
        run(monkeypatch, "--only", "rnnlm", "--out", str(tmp_path / "missing" / "p.json"))
    assert not (tmp_path / "missing").exists()


def kept(tmp_path, **stages) -> Path:
    out = tmp_path / "p.json"
    out.write_text(json.dumps({"graphs": {"rnnlm": {"cluster": "4gpu", **stages}}}))
    return out


@pytest.mark.parametrize("argv, stages, message", [
    (["--cluster", "2gpu"], {"heuristics": {}}, "stages heuristics, rl on 4gpu, not 2gpu"),
    (["--rl-budget", "30"], {"heuristics": {}, "rl": {"budget_seconds": 90.0}},
     "stage rl made with --rl-budget 90, not 30"),
])
def test_results_of_other_settings_are_refused_not_reused(monkeypatch, tmp_path, argv, stages, message):
    """They were kept as done, and reported (relabelled with this run's cluster) as this run's."""
    if "rl" not in stages:
        stages["rl"] = {"budget_seconds": 90.0}
    out = kept(tmp_path, **stages)
    before = out.read_text()
    with pytest.raises(PlacerError, match=message):
        run(monkeypatch, "--only", "rnnlm", "--out", str(out), *argv)
    assert out.read_text() == before


def test_a_fine_tune_stopped_by_another_budget_is_refused_one_that_got_there_is_kept(tmp_path):
    from types import SimpleNamespace

    args = SimpleNamespace(out="p.json", only=None, stages=["finetune"], redo=[], cluster="4gpu", rl_budget=90.0,
                           refine_seconds=2.0, finetune_budget=300.0, best_of=256, set="table")
    reached = {"steps_to_match": 12, "budget_seconds": 90.0, "steps_run": 12, "max_steps": None}
    bench_pretrain.check_kept_results({"graphs": {"rnnlm": {"cluster": "4gpu", "finetune": reached}}}, args, ["rnnlm"])
    stopped = {**reached, "steps_to_match": None, "steps_run": 300}
    with pytest.raises(PlacerError, match="stage finetune stopped by --finetune-budget 90, not 300"):
        bench_pretrain.check_kept_results({"graphs": {"rnnlm": {"cluster": "4gpu", "finetune": stopped}}}, args,
                                          ["rnnlm"])


def test_the_validation_set_is_the_corpus_validation_split_apart_from_the_table():
    """Fine-tuning was never tuned on these graphs; they must not leak into the table's graphs or file."""
    from placer.rl.pretrain import read_manifest

    _, manifest = read_manifest(Path(bench_pretrain.ROOT) / "corpus" / "graphs")
    validation = {label for label, _, _ in bench_pretrain.default_graphs("validation")}
    table = {label for label, _, _ in bench_pretrain.default_graphs("table")}
    assert validation == {e["name"] for e in manifest["graphs"] if e["split"] == "validation"}
    assert validation and not validation & table
    assert all(which.startswith("validation (") for _, _, which in bench_pretrain.default_graphs("validation"))


def test_a_results_file_of_the_other_set_is_refused(monkeypatch, tmp_path):
    out = kept(tmp_path, heuristics={})
    with pytest.raises(PlacerError, match=r"holds graphs not in --set validation \(rnnlm\)"):
        run(monkeypatch, "--set", "validation", "--out", str(out))
