"""`bench/bench_import.py` and `bench/bench_simulator.py`: a partial run never replaces the full run's results."""

import sys

import pytest

from bench import bench_import
from bench import bench_simulator


def test_a_quick_import_run_keeps_import_json(monkeypatch, tmp_path):
    """`--quick` rewrote import.json without the Inception-V3 import time README quotes from it."""
    monkeypatch.setattr(bench_import, "RESULTS", tmp_path)
    monkeypatch.setattr(bench_import, "bench_suite", lambda: [])
    monkeypatch.setattr(bench_import, "bench_import_time", lambda app: {"graph": app})
    monkeypatch.setattr(bench_import, "bench_forward_flops", lambda app: {"graph": app})
    monkeypatch.setattr(sys, "argv", ["bench_import.py", "--quick", "--skip-grappler"])
    assert bench_import.main() == 0
    assert [p.name for p in tmp_path.iterdir()] == ["import-quick-no-grappler.json"]


def test_a_quick_simulator_run_keeps_simulator_json(monkeypatch, tmp_path):
    monkeypatch.setattr(bench_simulator, "RESULTS", tmp_path)
    monkeypatch.setattr(bench_simulator, "bench_sizes", lambda sizes, cluster: [])
    monkeypatch.setattr(bench_simulator, "bench_batch", lambda n, k, cluster: {})
    monkeypatch.setattr(sys, "argv", ["bench_simulator.py", "--quick", "--skip-grappler"])
    assert bench_simulator.main() == 0
    assert [p.name for p in tmp_path.iterdir()] == ["simulator-quick-no-grappler.json"]


@pytest.mark.parametrize("bench, name", [(bench_import, "import"), (bench_simulator, "simulator")])
def test_each_partial_run_has_its_own_file(bench, name):
    assert bench.results_file(False, False).name == f"{name}.json"
    assert bench.results_file(True, False).name == f"{name}-quick.json"
    assert bench.results_file(False, True).name == f"{name}-no-grappler.json"
