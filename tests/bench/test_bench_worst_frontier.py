import json

import pytest

from bench import bench_worst_frontier
from placer.errors import PlacerError


def test_the_oracle_search_from_the_best_heuristic_never_loses_its_worst_world(tmp_path, small_graph, capsys,
                                                                               monkeypatch):
    out = tmp_path / "worst_frontier.json"
    argv = ["--pairs", f"{small_graph}@4gpu", "--sweeps", "2", "--worlds", "1", "--out", str(out)]
    assert bench_worst_frontier.main(argv) == 0
    stored = json.loads(out.read_text())
    assert stored["settings"] == {"sweeps": 2, "worlds": 1}
    (row,) = stored["rows"]
    best = row["best_heuristic"]
    cells = row["placements"]
    assert set(cells) == {best, "zero_shot", f"{best}+oracle", f"{best}+drawn", "zero_shot+oracle",
                          "zero_shot+drawn"}
    assert cells[best]["nominal"] == pytest.approx(1.0)
    # a search never ends slower than its start in the nominal world
    assert cells[f"{best}+oracle"]["nominal"] <= 1.0 + 1e-9
    assert cells[f"{best}+drawn"]["nominal"] <= 1.0 + 1e-9
    assert cells["zero_shot+oracle"]["nominal"] <= cells["zero_shot"]["nominal"] + 1e-9
    # judged in the very worlds that score it, from the best heuristic it keeps that heuristic's worst
    assert cells[f"{best}+oracle"]["worst_ratio"] <= cells[best]["worst_ratio"] + 1e-9
    assert "best heuristic+oracle" in capsys.readouterr().out

    # the same command again goes on where it stopped: nothing is placed again
    monkeypatch.setattr(bench_worst_frontier, "one_pair", lambda *a, **k: pytest.fail("placed again"))
    assert bench_worst_frontier.main(argv) == 0
    assert json.loads(out.read_text()) == stored


@pytest.mark.parametrize("argv, message", [
    (["--sweeps", "0"], "--sweeps must be at least 1, got 0"),
    (["--worlds", "0"], "--worlds must be at least 1, got 0"),
    (["--pairs", "graphs/rnnlm"], "expected GRAPH@CLUSTER"),
    (["--pairs", "graphs/rnnlm@3gpu"], "unknown cluster preset '3gpu'"),
])
def test_bad_settings_stop_it_before_any_placing(monkeypatch, tmp_path, argv, message):
    monkeypatch.setattr(bench_worst_frontier, "one_pair", lambda *a, **k: pytest.fail("placed"))
    with pytest.raises(PlacerError, match=message):
        bench_worst_frontier.main([*argv, "--out", str(tmp_path / "f.json")])
