"""`bench/bench_placers.py`: the compare rows it saves for --resume."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import bench_placers  # noqa: E402

from placer.graph_io import save_graph  # noqa: E402
from placer.synthetic import layered_graph  # noqa: E402


def test_each_save_is_a_new_file_renamed_over_the_last(tmp_path, monkeypatch):
    """A kill during a save must leave the earlier rows whole for --resume, so the file is never rewritten in place."""
    monkeypatch.setattr(bench_placers, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(bench_placers, "write_compare_report", lambda *args: None)
    out = tmp_path / "results" / "placers_compare.json"
    inodes = []  # the saved file's, as each row's progress line is logged
    monkeypatch.setattr(bench_placers, "log", lambda message: inodes.append(out.stat().st_ino))
    (tmp_path / "graphs").mkdir()
    save_graph(layered_graph(30, seed=0), tmp_path / "graphs" / "g.json.gz")
    rows = bench_placers.comparison(tmp_path / "graphs", ["2gpu"], ["single", "metis"], resume=False)
    assert [r["method"] for r in rows] == ["single", "metis"]
    assert len(set(inodes)) == 2
