import json

import pytest

from bench import bench_refine_starts
from placer.errors import PlacerError


def test_a_run_refines_the_zero_shot_answer_and_the_near_heuristics_alike(tmp_path, small_graph, capsys,
                                                                         monkeypatch):
    out = tmp_path / "refine_starts.json"
    argv = ["--graphs", str(small_graph), "--clusters", "4gpu", "--sweeps", "1", "2", "--worlds", "1",
            "--out", str(out)]
    assert bench_refine_starts.main(argv) == 0
    stored = json.loads(out.read_text())
    assert stored["settings"] == {"sweeps": [1, 2], "worlds": 1}
    (row,) = stored["rows"]
    best = row["heuristics"][row["best_heuristic"]]
    refined = row["zero_shot_refined"]
    assert refined["2"]["step_time"] <= refined["1"]["step_time"] <= row["zero_shot"]["step_time"]
    assert 1 <= len(row["heuristics_refined"]) <= bench_refine_starts.REFINED_HEURISTICS
    for method, found in row["heuristics_refined"].items():
        assert row["heuristics"][method] <= bench_refine_starts.NEAR * best
        assert found["step_time"] <= row["heuristics"][method]
        assert f"{method}+2" in row["robustness"]
    assert {"zero_shot", "zero_shot+1", "zero_shot+2"} <= set(row["robustness"])
    assert set(row["robustness_with_refined"]) == set(row["robustness"])
    # judged as `placer compare --worlds` does: the best heuristic is the reference of the nominal world
    assert row["robustness"][row["best_heuristic"]]["nominal"] == pytest.approx(1.0)
    assert row["robustness"][row["best_heuristic"]]["worst_ratio"] >= 1.0
    assert "best heuristic + 2 sweeps" in capsys.readouterr().out

    # the same command again goes on where it stopped: nothing is placed again
    monkeypatch.setattr(bench_refine_starts, "one_pair", lambda *a, **k: pytest.fail("placed again"))
    assert bench_refine_starts.main(argv) == 0
    assert json.loads(out.read_text()) == stored


@pytest.mark.parametrize("argv, message", [
    (["--sweeps", "0"], "--sweeps must be at least 1, got 0"),
    (["--worlds", "0"], "--worlds must be at least 1, got 0"),
    (["--clusters", "3gpu"], "unknown cluster preset '3gpu'"),
])
def test_bad_settings_stop_it_before_any_placing(monkeypatch, tmp_path, argv, message):
    monkeypatch.setattr(bench_refine_starts, "one_pair", lambda *a, **k: pytest.fail("placed"))
    with pytest.raises(PlacerError, match=message):
        bench_refine_starts.main([*argv, "--out", str(tmp_path / "f.json")])
