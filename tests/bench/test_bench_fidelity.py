"""`bench/bench_fidelity.py`: its files go where --out says, and bad settings stop it before any measuring."""

import sys

import pytest

from bench import bench_fidelity
from placer import presets
from placer.errors import PlacerError

CALIBRATION = {"crossing_seconds_64B": 1e-6, "crossing_seconds_4194304B": 5e-5, "fitted_latency": 1e-6,
               "fitted_bandwidth": 9e10, "device_parallel_speedup": 1.0}


@pytest.fixture
def nothing_measured(monkeypatch):
    """No TensorFlow runs: calibration and graphs stand-ins; the graphs each run is asked for, with its folder."""
    runs = []
    monkeypatch.setattr(bench_fidelity, "calibrate", lambda: CALIBRATION)
    monkeypatch.setattr(bench_fidelity, "run_graph", lambda name, args, cache: runs.append((name, cache)) or {
        "ops": 1, "placements": 0, "spearman": 1.0, "mape": 0.0, "spearman_p10": 1.0, "mape_p10": 0.0})
    monkeypatch.setattr(bench_fidelity, "plot", lambda results, path: None)
    monkeypatch.setattr(bench_fidelity, "calibrated_cluster", lambda args: presets.get("local"))
    monkeypatch.setattr(bench_fidelity, "simulate_configs", lambda *a: None)
    return runs


def test_graph_files_go_beside_out_not_into_the_committed_results(monkeypatch, tmp_path, nothing_measured):
    """With --out elsewhere, the profiled graphs still overwrote bench/results/fidelity/, which --resimulate of
    the committed fidelity.json reads."""
    out = tmp_path / "f.json"
    monkeypatch.setattr(sys, "argv", ["bench_fidelity.py", "--graphs", "cnn", "--out", str(out)])
    assert bench_fidelity.main() == 0
    assert nothing_measured == [("cnn", tmp_path / "f")]
    assert out.exists() and (tmp_path / "f").is_dir()


@pytest.mark.parametrize("argv, message", [
    (["--graphs", "cnn,lstmm"], "--graphs: unknown 'lstmm' \\(known: cnn, lstm, resnet\\)"),
    (["--rounds", "0"], "--rounds must be at least 1, got 0"),
    (["--random", "-1"], "--random must be 0 or more, got -1"),
])
def test_bad_settings_stop_it_before_the_calibration(monkeypatch, tmp_path, nothing_measured, argv, message):
    """An unknown graph name was a traceback after the calibration had run."""
    monkeypatch.setattr(bench_fidelity, "calibrate", lambda: pytest.fail("calibrated"))
    monkeypatch.setattr(sys, "argv", ["bench_fidelity.py", "--out", str(tmp_path / "f.json"), *argv])
    with pytest.raises(PlacerError, match=message):
        bench_fidelity.main()


def test_out_in_a_missing_folder_is_refused(monkeypatch, tmp_path, nothing_measured):
    monkeypatch.setattr(sys, "argv", ["bench_fidelity.py", "--out", str(tmp_path / "missing" / "f.json")])
    with pytest.raises(PlacerError, match="does not exist"):
        bench_fidelity.main()
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize("name", ["f", "f.png"])
def test_out_not_ending_in_json_is_refused(monkeypatch, tmp_path, nothing_measured, name):
    """``--out f`` made the folder of graphs at f itself, and the results could not be written there."""
    monkeypatch.setattr(sys, "argv", ["bench_fidelity.py", "--out", str(tmp_path / name)])
    with pytest.raises(PlacerError, match="must end in .json"):
        bench_fidelity.main()
    assert list(tmp_path.iterdir()) == []


def test_each_graph_is_simulated_on_the_calibration_of_its_own_measurements(monkeypatch, tmp_path, nothing_measured):
    """A calibration records the machine's load of its moment. Re-measuring one graph with --force calibrated
    again and overwrote the one file-wide calibration, so the other graphs' calibrated figures could no longer be
    reproduced from the file they were stored in."""
    import json

    then = presets.get("local").to_dict() | {"name": "local-then"}
    out = tmp_path / "f.json"
    figures = {"ops": 1, "placements": 0, "spearman": 1.0, "mape": 0.0, "spearman_p10": 1.0, "mape_p10": 0.0}
    out.write_text(json.dumps({"lstm": {"graph": "lstm", "calibrated_cluster": then, **figures}}))
    monkeypatch.setattr(bench_fidelity, "run_graph", lambda name, args, cache: {"graph": name, **figures})
    simulated_on = {}
    monkeypatch.setattr(bench_fidelity, "simulate_configs",
                        lambda result, cache, cluster: simulated_on.update({result["graph"]: cluster.name}))
    monkeypatch.setattr(sys, "argv", ["bench_fidelity.py", "--graphs", "cnn,lstm", "--out", str(out)])
    assert bench_fidelity.main() == 0
    assert simulated_on == {"cnn": "local", "lstm": "local-then"}
    stored = json.loads(out.read_text())
    assert stored["cnn"]["calibrated_cluster"]["name"] == "local" and stored["cnn"]["calibration"] == CALIBRATION
