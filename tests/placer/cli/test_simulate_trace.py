"""`placer simulate --trace FILE --gantt FILE`."""

import json

from placer.graph import Op, OpGraph
from placer.graph_io import save_graph


def _files(tmp_path):
    g = OpGraph("fork", [
        Op("s", "T", cost={"gpu": 1e-3}, output_bytes=12e6),
        Op("x", "T", ["s"], cost={"gpu": 4e-3}, output_bytes=12e6),
        Op("y", "T", ["s"], cost={"gpu": 4e-3}, output_bytes=12e6),
        Op("j", "T", ["x", "y"], cost={"gpu": 1e-3}),
    ])
    save_graph(g, tmp_path / "g.json")
    placement = {"devices": {"s": "/device:GPU:0", "x": "/device:GPU:0", "y": "/device:GPU:1", "j": "/device:GPU:0"}}
    (tmp_path / "p.json").write_text(json.dumps(placement))
    return [tmp_path / "g.json", "--cluster", "2gpu", "--placement", tmp_path / "p.json"]


def test_trace_and_gantt(cli, tmp_path):
    """Both files are written; the trace's last op ends at the printed step time."""
    r = cli("simulate", *_files(tmp_path), "--trace", tmp_path / "t.json", "--gantt", tmp_path / "g.png", "--json")
    assert r.code == 0, r.err
    out = json.loads(r.out)
    assert out["trace"] == str(tmp_path / "t.json") and out["gantt"] == str(tmp_path / "g.png")
    trace = json.loads((tmp_path / "t.json").read_text())
    ends = [e["ts"] + e["dur"] for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] != "transfer"]
    assert max(ends) / 1e6 == out["step_time"]
    assert (tmp_path / "g.png").read_bytes()[:4] == b"\x89PNG"


def test_table_output_names_files(cli, tmp_path):
    r = cli("simulate", *_files(tmp_path), "--trace", tmp_path / "t.json.gz")
    assert r.code == 0 and f"wrote trace {tmp_path / 't.json.gz'}" in r.out


def test_bad_gantt_format_is_one_line(cli, tmp_path):
    r = cli("simulate", *_files(tmp_path), "--gantt", tmp_path / "g.nope")
    assert r.code == 1 and "g.nope" in r.err and r.err.count("\n") == 1
