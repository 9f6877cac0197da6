"""`placer simulate --trace FILE --gantt FILE`."""

import json


def _args(d):
    """`placer simulate` arguments for the fork that `fork_files` wrote to folder `d`."""
    return [d / "g.json", "--cluster", "2gpu", "--placement", d / "p.json"]


def test_trace_and_gantt(cli, fork_files, tmp_path):
    """Both files are written; the trace's last op ends at the printed step time."""
    r = cli("simulate", *_args(fork_files), "--trace", tmp_path / "t.json", "--gantt", tmp_path / "g.png", "--json")
    assert r.code == 0, r.err
    out = json.loads(r.out)
    assert out["trace"] == str(tmp_path / "t.json") and out["gantt"] == str(tmp_path / "g.png")
    trace = json.loads((tmp_path / "t.json").read_text())
    ends = [e["ts"] + e["dur"] for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] != "transfer"]
    assert max(ends) / 1e6 == out["step_time"]
    assert (tmp_path / "g.png").read_bytes()[:4] == b"\x89PNG"


def test_table_output_names_files(cli, fork_files, tmp_path):
    r = cli("simulate", *_args(fork_files), "--trace", tmp_path / "t.json.gz")
    assert r.code == 0 and f"wrote trace {tmp_path / 't.json.gz'}" in r.out


def test_bad_gantt_format_is_one_line(cli, fork_files, tmp_path):
    r = cli("simulate", *_args(fork_files), "--gantt", tmp_path / "g.nope")
    assert r.code == 1 and "g.nope" in r.err and r.err.count("\n") == 1
