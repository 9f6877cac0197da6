"""`bench.bench_routes`: the before/after table of two runs."""

import json

from bench.bench_routes import main, table


def row(method, step, oom=False, graph="g", cluster="dgx-a100"):
    return {"graph": graph, "ops": 3, "cluster": cluster, "method": method, "step_time": step, "oom": oom,
            "seconds": 0.5}


def test_table_gives_each_ratio_and_the_geometric_mean():
    before = [row("heft", 0.2), row("heft", 0.1, graph="h"), row("metis", 0.1)]
    after = [row("heft", 0.1), row("heft", 0.4, graph="h", oom=True), row("metis", 0.1)]
    text = table(before, after)
    assert "| g | dgx-a100 | heft | 200.00 | 100.00 | 0.500 | 0.50 -> 0.50 |" in text
    assert "| h | dgx-a100 | heft | 100.00 | 400.00 (oom) | 4.000 |" in text
    assert "| dgx-a100/heft | 1.414 | 0.500 | 4.000 |" in text
    assert "| dgx-a100/metis | 1.000 | 1.000 | 1.000 |" in text


def test_rows_missing_from_before_are_left_out(tmp_path, capsys):
    b, a = tmp_path / "b.json", tmp_path / "a.json"
    b.write_text(json.dumps({"rows": [row("heft", 0.2)]}))
    a.write_text(json.dumps({"rows": [row("heft", 0.1), row("cpop", 0.1)]}))
    assert main(["--table", str(b), str(a)]) == 0
    out = capsys.readouterr().out
    assert "| heft |" in out and "cpop" not in out
