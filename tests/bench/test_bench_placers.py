"""`bench/bench_placers.py`: the compare rows it saves for --resume."""

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench import bench_placers
from placer import presets
from placer.graph_io import save_graph
from placer.synthetic import layered_graph


def test_each_save_is_a_new_file_renamed_over_the_last(tmp_path, monkeypatch):
    """A kill during a save must leave the earlier rows whole for --resume, so the file is never rewritten in place."""
    monkeypatch.setattr(bench_placers, "write_compare_report", lambda *args: None)
    (tmp_path / "results").mkdir()
    out = tmp_path / "results" / "placers_compare.json"
    inodes = []  # the saved file's, as each row's progress line is logged
    monkeypatch.setattr(bench_placers, "log", lambda message: inodes.append(out.stat().st_ino))
    (tmp_path / "graphs").mkdir()
    save_graph(layered_graph(30, seed=0), tmp_path / "graphs" / "g.json.gz")
    rows = bench_placers.comparison(tmp_path / "graphs", ["2gpu"], ["single", "metis"], resume=False,
                                     out=tmp_path / "results")
    assert [r["method"] for r in rows] == ["single", "metis"]
    assert len(set(inodes)) == 2


def _graphs(tmp_path, seed: int = 0) -> Path:
    """A graphs/ folder holding one 30-op graph, ``layered30`` (another seed: another file of the same name)."""
    (tmp_path / "graphs").mkdir(exist_ok=True)
    save_graph(layered_graph(30, seed=seed), tmp_path / "graphs" / "g.json.gz")
    return tmp_path / "graphs"


def test_resume_places_again_the_rows_of_a_graph_file_changed_under_its_name(tmp_path, monkeypatch, capsys):
    """--resume kept rows by graph name alone, so a graph file rewritten under the same name was answered with
    the old file's step times."""
    monkeypatch.setattr(bench_placers, "write_compare_report", lambda *args: None)
    out = tmp_path / "out"
    out.mkdir()
    bench_placers.comparison(_graphs(tmp_path, seed=0), ["2gpu"], ["single"], resume=False, out=out)
    capsys.readouterr()
    rows = bench_placers.comparison(_graphs(tmp_path, seed=1), ["2gpu"], ["single"], resume=True, out=out)
    assert [r["graph_fingerprint"] for r in rows] == [layered_graph(30, seed=1).fingerprint]
    assert "layered30 on 2gpu: its saved rows were made from another graph file" in capsys.readouterr().err
    assert json.loads((out / "placers_compare.json").read_text()) == rows


def _saved_run(tmp_path, monkeypatch):
    """``(out, graphs, rows)`` of a first run of ``single`` on 2gpu, its rows saved in ``out``."""
    monkeypatch.setattr(bench_placers, "write_compare_report", lambda *args: None)
    out = tmp_path / "out"
    out.mkdir()
    graphs = _graphs(tmp_path)
    return out, graphs, bench_placers.comparison(graphs, ["2gpu"], ["single"], resume=False, out=out)


def test_resume_places_again_the_rows_of_a_cluster_changed_under_its_name(tmp_path, monkeypatch, capsys):
    out, graphs, saved = _saved_run(tmp_path, monkeypatch)
    saved[0]["cluster_fingerprint"] = "0123456789abcdef"  # made on a 2gpu preset since edited
    (out / "placers_compare.json").write_text(json.dumps(saved))
    capsys.readouterr()
    rows = bench_placers.comparison(graphs, ["2gpu"], ["single"], resume=True, out=out)
    assert rows[0]["cluster_fingerprint"] == presets.get("2gpu").fingerprint
    assert "layered30 on 2gpu: its saved rows were made on another 2gpu cluster" in capsys.readouterr().err


def test_resume_keeps_the_rows_of_the_same_files(tmp_path, monkeypatch, capsys):
    out, graphs, saved = _saved_run(tmp_path, monkeypatch)
    monkeypatch.setattr(bench_placers, "compare", lambda *args: pytest.fail("placed again"))
    assert bench_placers.comparison(graphs, ["2gpu"], ["single"], resume=True, out=out) == saved


@pytest.fixture
def nothing_placed(tmp_path, monkeypatch):
    """RESULTS in tmp_path (holding README's files), and placers that place nothing."""
    monkeypatch.setattr(bench_placers, "RESULTS", tmp_path / "results")
    (tmp_path / "results").mkdir()
    for name in ("placers_speed.json", "placers_speed.md", "placers_compare.json", "placers_compare.md"):
        (tmp_path / "results" / name).write_text("README's")
    monkeypatch.setattr(bench_placers, "layered_graph", lambda n: layered_graph(30, seed=0))
    monkeypatch.setattr(bench_placers.registry, "place",
                        lambda method, graph, cluster: SimpleNamespace(meta={"place_seconds": 0.0}, step_time=1.0,
                                                                      lower_bound=1.0, oom=False, max_load=None))
    return tmp_path / "results"


def _readmes(results: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in results.iterdir() if p.is_file()}


@pytest.mark.parametrize("argv", [["--ops", "1000", "--skip-compare"], ["--clusters", "2gpu", "--skip-compare"],
                                  ["--methods", "single", "--skip-compare"]])
def test_a_partial_run_keeps_the_results_readme_quotes(nothing_placed, monkeypatch, argv):
    """A small check (``--ops 1000``) rewrote placers_speed.json and .md, which README quotes."""
    monkeypatch.setattr(sys, "argv", ["bench_placers.py", *argv])
    assert bench_placers.main() == 0
    assert set(_readmes(nothing_placed).values()) == {"README's"}
    assert (nothing_placed / "partial" / "placers_speed.json").exists()


def test_a_partial_compare_run_keeps_the_results_readme_quotes(nothing_placed, monkeypatch, tmp_path):
    monkeypatch.setattr(bench_placers, "write_compare_report", lambda rows, clusters, methods, out: None)
    monkeypatch.setattr(sys, "argv", ["bench_placers.py", "--skip-speed", "--clusters", "2gpu",
                                      "--graphs", str(_graphs(tmp_path))])
    assert bench_placers.main() == 0
    assert set(_readmes(nothing_placed).values()) == {"README's"}
    assert (nothing_placed / "partial" / "placers_compare.json").exists()


def test_out_names_where_a_run_writes(nothing_placed, monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "argv", ["bench_placers.py", "--ops", "1000", "--skip-compare",
                                      "--out", str(tmp_path / "mine")])
    assert bench_placers.main() == 0
    assert set(_readmes(nothing_placed).values()) == {"README's"}
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["placers_speed.json", "placers_speed.md"]


def test_a_partial_run_pointed_at_the_results_replaces_them(nothing_placed, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["bench_placers.py", "--ops", "1000", "--skip-compare",
                                      "--out", str(nothing_placed)])
    assert bench_placers.main() == 0
    assert _readmes(nothing_placed)["placers_speed.md"] != "README's"


def test_the_full_run_writes_the_results_readme_quotes():
    args = bench_placers.parse_args([])
    assert bench_placers.out_folder(args, bench_placers.registry.resolve(args.methods)) == bench_placers.RESULTS


@pytest.mark.parametrize("argv, message", [
    (["--ops", "0"], "--ops must be at least 1, got 0"),
    (["--clusters", "2gpu", "9gpu"], "unknown cluster preset '9gpu'"),
])
def test_bad_settings_are_refused_before_any_run(argv, message):
    from placer.errors import PlacerError

    with pytest.raises(PlacerError, match=message):
        bench_placers.check_args(bench_placers.parse_args(argv))


def test_the_table_of_a_resumed_run_of_a_few_methods_keeps_the_other_columns(tmp_path, monkeypatch):
    """Resumed with ``--methods single`` on 2gpu, the table showed that column and cluster alone."""
    import placer.plots

    monkeypatch.setattr(placer.plots, "compare_chart", lambda rows, path, title: None)
    out = tmp_path / "out"
    out.mkdir()
    graphs = _graphs(tmp_path)
    bench_placers.comparison(graphs, ["2gpu", "4gpu"], ["single", "metis"], resume=False, out=out)
    bench_placers.comparison(graphs, ["2gpu"], ["single"], resume=True, out=out)
    table = (out / "placers_compare.md").read_text()
    assert "| single | metis | winner |" in table
    assert "| layered30 | 4gpu |" in table
