"""`bench/bench_datasets.py`: --only must name something, and the tables keep every saved row."""

import json
import sys

import pytest

from bench import bench_datasets
from placer.errors import PlacerError

pytestmark = pytest.mark.skipif(not bench_datasets.MSR.is_dir(), reason="needs ../shared/datasets")


def test_only_matching_nothing_is_refused(monkeypatch, tmp_path):
    """It ran nothing and printed the old tables, exit 0."""
    monkeypatch.setattr(bench_datasets, "RESULTS", tmp_path)
    monkeypatch.setattr(sys, "argv", ["bench_datasets.py", "--only", "gnmt_trainig"])
    with pytest.raises(PlacerError, match="--only 'gnmt_trainig': no workload id contains it"):
        bench_datasets.main()


def test_a_run_of_a_few_methods_keeps_the_others_in_the_tables(monkeypatch, tmp_path):
    """`--methods single` rewrote datasets.md with the single column alone."""
    monkeypatch.setattr(bench_datasets, "RESULTS", tmp_path)
    wid = "msr/layer/bert24_inference"
    saved = {f"{wid}|{m}": {"workload": wid, "method": m, "ops": 32, "max_load": 20.0, "step_time": 1.0,
                            "fits": True, "seconds": 0.1} for m in ("single", "heft")}
    (tmp_path / "datasets.json").write_text(json.dumps(saved))
    monkeypatch.setattr(bench_datasets, "run_workload", lambda *a: None)
    monkeypatch.setattr(sys, "argv", ["bench_datasets.py", "--only", "bert24_inference", "--methods", "single"])
    assert bench_datasets.main() == 0
    header = next(line for line in (tmp_path / "datasets.md").read_text().splitlines()
                  if line.startswith("| workload | published expert"))
    assert "| single |" in header and "| heft |" in header
