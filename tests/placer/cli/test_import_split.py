"""Profiled datasets end to end: `placer import` (MSR, PipeDream), `import-split`, `simulate --objective`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.placer.importers.test_msr import _workload
from tests.placer.importers.test_pipedream import PROFILE

DATASET = Path(__file__).resolve().parents[3] / ".." / "shared" / "datasets" / "msr_dnn_partitioning"


@pytest.fixture
def msr_files(tmp_path):
    (tmp_path / "tiny.json").write_text(json.dumps(_workload()))
    split = {"fpgas": [{"nodes": [1]}, {"nodes": [2]}], "cpus": [], "maxLoad": 6.625}
    (tmp_path / "split.json").write_text(json.dumps(split))
    return tmp_path


def test_msr_import_split_simulate_throughput(cli, msr_files):
    d = msr_files
    r = cli("import", d / "tiny.json", "-o", d / "g.json", "--cluster-out", d / "c.json")
    assert r.code == 0, r.err
    assert json.loads((d / "c.json").read_text())["devices"][1]["memory_bytes"] == 1000.0
    r = cli("import-split", d / "tiny.json", d / "split.json", "-o", d / "p.json", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["published_max_load"] == 6.625
    r = cli("simulate", d / "g.json", "--cluster", d / "c.json", "--placement", d / "p.json",
            "--objective", "throughput", "--json")
    assert r.code == 0, r.err
    out = json.loads(r.out)
    # forward-only split, backward nodes follow their class: GPU0 4 + 0.5 + 0.125, GPU1 6 + 0.5 + 0.125
    assert out["max_load"] == 6.625
    assert [dev["load"] for dev in out["devices"]] == [0.0, 4.625, 6.625]
    assert out["memory_ok"] and out["colocation_ok"] and out["objective"] == "throughput"


def test_step_time_objective_prints_no_max_load(cli, msr_files):
    d = msr_files
    cli("import", d / "tiny.json", "-o", d / "g.json", "--cluster-out", d / "c.json")
    cli("import-split", d / "tiny.json", d / "split.json", "-o", d / "p.json")
    r = cli("simulate", d / "g.json", "--cluster", d / "c.json", "--placement", d / "p.json", "--json")
    assert r.code == 0 and "max_load" not in json.loads(r.out)


def test_pipedream_profile_is_detected(cli, tmp_path):
    path = tmp_path / "tiny" / "graph.txt"
    path.parent.mkdir()
    path.write_text(PROFILE)
    r = cli("import", path, "-o", tmp_path / "g.json", "--json")
    assert r.code == 0, r.err
    g = json.loads((tmp_path / "g.json").read_text())
    assert g["name"] == "tiny" and g["meta"]["format"] == "pipedream"


def test_cluster_out_needs_an_msr_workload(cli, tmp_path):
    path = tmp_path / "graph.txt"
    path.write_text(PROFILE)
    r = cli("import", path, "-o", tmp_path / "g.json", "--cluster-out", tmp_path / "c.json")
    assert r.code == 1 and "not an MSR workload" in r.err and r.err.count("\n") == 1
    assert not (tmp_path / "g.json").exists()


def test_bad_split_is_one_line(cli, msr_files):
    (msr_files / "bad.json").write_text(json.dumps({"fpgas": [{"nodes": [1, 1]}]}))
    r = cli("import-split", msr_files / "tiny.json", msr_files / "bad.json", "-o", msr_files / "p.json")
    assert r.code == 1 and "placed twice" in r.err and r.err.count("\n") == 1


@pytest.mark.skipif(not DATASET.is_dir(), reason="the public datasets are not beside the clone (../shared/datasets)")
def test_published_expert_max_load_from_the_command_line(cli, tmp_path):
    """The README's ResNet50 expert value, through the commands a user runs."""
    workload = DATASET / "throughput-inputs/LayerGraphs/resnet50_inference.json"
    assert cli("import", workload, "-o", tmp_path / "g.json", "--cluster-out", tmp_path / "c.json").code == 0
    assert cli("import-split", workload, DATASET / "human-experts/resnet50_inference_expert.json",
               "-o", tmp_path / "p.json").code == 0
    r = cli("simulate", tmp_path / "g.json", "--cluster", tmp_path / "c.json", "--placement", tmp_path / "p.json",
            "--objective", "throughput", "--json")
    assert json.loads(r.out)["max_load"] == pytest.approx(43.9183, abs=5e-5)


def test_place_and_compare_with_throughput_objective(cli, msr_files):
    d = msr_files
    cli("import", d / "tiny.json", "-o", d / "g.json", "--cluster-out", d / "c.json")
    r = cli("place", d / "g.json", "--cluster", d / "c.json", "--method", "pipeline_dp", "--objective", "throughput",
            "--json")
    assert r.code == 0, r.err
    placement = json.loads(r.out)
    assert placement["objective"] == "throughput" and placement["max_load"] == 6.625
    r = cli("compare", d / "g.json", "--cluster", d / "c.json", "--methods", "single,pipeline_dp",
            "--objective", "throughput", "--json", "--quiet")
    assert r.code == 0, r.err
    rows = {row["method"]: row for row in json.loads(r.out)}
    assert rows["single"]["ignored_objective"] == "throughput"
    assert rows["pipeline_dp"]["max_load"] == 6.625 and "ignored_objective" not in rows["pipeline_dp"]
    r = cli("compare", d / "g.json", "--cluster", d / "c.json", "--methods", "single,pipeline_dp",
            "--objective", "throughput", "--quiet")
    assert "pipeline_dp*" in r.out and "(built for step_time)" in r.out


def test_compare_resume_does_not_reuse_rows_of_another_objective(cli, msr_files):
    d = msr_files
    cli("import", d / "tiny.json", "-o", d / "g.json", "--cluster-out", d / "c.json")
    common = ("compare", d / "g.json", "--cluster", d / "c.json", "--methods", "pipeline_dp", "--json", "--quiet",
              "--save", d / "rows.json")
    assert cli(*common).code == 0  # a step_time run: no max_load
    r = cli(*common, "--resume", "--objective", "throughput")
    assert r.code == 0, r.err
    assert json.loads(r.out)[0]["max_load"] == 6.625


def test_msr_times_print_in_the_datasets_milliseconds(cli, msr_files):
    """The importer keeps the dataset's milliseconds; printed as times they must read as ms, not s."""
    from placer.cli.output import human_seconds

    d = msr_files
    cli("import", d / "tiny.json", "-o", d / "g.json", "--cluster-out", d / "c.json")
    cli("import-split", d / "tiny.json", d / "split.json", "-o", d / "p.json")
    step_time = json.loads(cli("simulate", d / "g.json", "--cluster", d / "c.json", "--placement", d / "p.json",
                               "--json").out)["step_time"]
    r = cli("simulate", d / "g.json", "--cluster", d / "c.json", "--placement", d / "p.json")
    assert r.code == 0, r.err
    assert f"step time {human_seconds(step_time * 1e-3)} " in r.out and human_seconds(step_time * 1e-3).endswith("ms")
    r = cli("compare", d / "g.json", "--cluster", d / "c.json", "--methods", "single", "--quiet")
    assert r.code == 0 and " s " not in r.out.splitlines()[1] and "ms" in r.out.splitlines()[1]
