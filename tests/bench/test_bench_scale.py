"""`bench/bench_scale.py`: rows saved as measured, a heuristic past its cap reported as such, resumed runs."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from bench import bench_scale
from placer import presets
from placer.synthetic import layered_graph


def test_rows_saved_and_resumed(tmp_path):
    """Each (graph, cluster, stage) row is saved with time and peak memory; a rerun measures nothing again."""
    out = tmp_path / "scale.json"
    args = ["--graphs", "layered1k", "--clusters", "2x-dgx-a100", "--stages", "simulate", "m_topo", "grouping",
            "--out", str(out)]
    assert bench_scale.main(args) == 0
    data = json.loads(out.read_text())
    rows = data["rows"]
    assert set(rows) == {f"layered1k|2x-dgx-a100|{s}" for s in ("simulate", "m_topo", "grouping")}
    for row in rows.values():
        assert row["status"] == "ok" and row["ops"] == 1000
        assert row["seconds"] >= 0 and row["peak_rss_mib"] > 0 and row["base_rss_mib"] > 0
    assert rows["layered1k|2x-dgx-a100|m_topo"]["step_time"] > 0
    saved = out.read_text()
    assert bench_scale.main(args) == 0
    assert out.read_text().count('"status"') == saved.count('"status"') == 3


def test_a_stage_past_its_cap_is_stopped_and_reported(monkeypatch):
    """A stage still running at its cap is killed; its row says so and prints as '> cap'."""

    def slow(graph, cluster):
        time.sleep(30 if len(graph) > 200 else 0)  # the 200-op warm-up returns at once
        return 0.0, {}

    t0 = time.perf_counter()
    row = bench_scale.run_forked(slow, layered_graph(300), presets.get("2gpu"), cap=1.0)
    assert time.perf_counter() - t0 < 20
    assert row["status"] == "capped" and row["seconds"] is None
    assert bench_scale.fmt(row) == "> 1 s"


def test_a_failing_stage_is_an_error_row():
    def broken(graph, cluster):
        raise ValueError("no")

    row = bench_scale.run_forked(broken, layered_graph(300), presets.get("2gpu"), cap=30.0)
    assert row["status"] == "error" and "ValueError: no" in row["error"]


def test_two_runs_share_one_file(tmp_path):
    """A save keeps the rows another run saved meanwhile, and never puts back a row this run only read."""
    out = tmp_path / "scale.json"
    bench_scale.save(out, {"rows": {"a": {"v": 2}, "b": {"v": 1}}, "graphs": {}}, {"a": {"v": 2}, "b": {"v": 1}})
    mine = {"rows": {"a": {"v": 1}, "c": {"v": 1}}, "graphs": {}}  # read 'a' before the other run remeasured it
    bench_scale.save(out, mine, {"c": {"v": 1}})
    assert json.loads(out.read_text())["rows"] == {"a": {"v": 2}, "b": {"v": 1}, "c": {"v": 1}}


def test_zero_shot_beside_a_busy_process_on_a_graph_file(tmp_path):
    """A graph file is measured as named; with --busy the row is saved under the stage's name plus @busyN and
    keeps its CPU seconds and the answer's split of its time."""
    from placer.graph_io import save_graph

    path = tmp_path / "g.json.gz"
    save_graph(layered_graph(400, seed=1), path)
    out = tmp_path / "scale.json"
    # In a fresh interpreter, as the bench runs: earlier tests in this process may have run GNU OpenMP
    # (TensorFlow's, or the simulator's parallel loops from another thread), and numba's OpenMP layer kills
    # a child forked from such a process (seen with test_zero_shot.py first); the bench forks its stages.
    run = subprocess.run([sys.executable, "-m", "bench.bench_scale", "--graphs", str(path), "--clusters", "4gpu",
                          "--stages", "zero_shot", "--busy", "1", "--out", str(out)],
                         cwd=Path(bench_scale.__file__).resolve().parents[1], capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    row = json.loads(out.read_text())["rows"][f"{path}|4gpu|zero_shot@busy1"]
    assert row["status"] == "ok" and row["ops"] == 400
    assert row["cpu_seconds"] > 0 and row["thread_cpu_seconds"] > 0
    assert set(row["breakdown"]) == {"grouping_and_features", "decoding", "total"}
