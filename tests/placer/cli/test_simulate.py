"""`placer simulate` (the `fork_files` fixture is in conftest.py)."""

import json

import pytest


def test_json_output(cli, fork_files):
    r = cli("simulate", fork_files / "g.json", "--cluster", "2gpu-flat", "--placement", fork_files / "p.json", "--json")
    assert r.code == 0, r.err
    out = json.loads(r.out)
    # s 0-1 ms; send 10 us + 12e6 / 12e9 s = 1.01 ms each way; y 2.01-6.01; back 6.01-7.02; j 7.02-8.02
    assert out["step_time"] == pytest.approx(8.02e-3)
    assert out["oom"] is False and out["bytes_moved"] == 24e6
    assert set(out["peak_memory"]) == {"/device:CPU:0", "/device:GPU:0", "/device:GPU:1"}


def test_table_output(cli, fork_files):
    r = cli("simulate", fork_files / "g.json", "--cluster", "2gpu-flat", "--placement", fork_files / "p.json")
    assert r.code == 0 and "step time 8.020 ms" in r.out and "/device:GPU:1" in r.out


def test_unknown_device(cli, fork_files):
    (fork_files / "bad.json").write_text(json.dumps({"devices": {"s": "/device:GPU:9", "x": "a", "y": "a", "j": "a"}}))
    r = cli("simulate", fork_files / "g.json", "--cluster", "2gpu", "--placement", fork_files / "bad.json")
    assert r.code == 1 and "'/device:GPU:9'" in r.err and r.err.count("\n") == 1


def test_unknown_cluster(cli, fork_files):
    r = cli("simulate", fork_files / "g.json", "--cluster", "3gpu", "--placement", fork_files / "p.json")
    assert r.code == 1 and "unknown cluster '3gpu'" in r.err


def test_placement_not_an_object(cli, fork_files):
    (fork_files / "bad.json").write_text("[1, 2]")
    r = cli("simulate", fork_files / "g.json", "--cluster", "2gpu", "--placement", fork_files / "bad.json")
    assert r.code == 1 and "'devices'" in r.err


def test_a_placement_splitting_a_colocation_group_is_flagged(cli, fork_files):
    """TensorFlow keeps a colocation group on one device; a placement that splits it is simulated but flagged
    (only the throughput objective said so before)."""
    g = json.loads((fork_files / "g.json").read_text())
    for node in g["nodes"]:
        if node["name"] in ("x", "y"):
            node["colocation"] = "w"
    (fork_files / "g.json").write_text(json.dumps(g))
    args = ("simulate", fork_files / "g.json", "--cluster", "2gpu-flat", "--placement", fork_files / "p.json")
    r = cli(*args)
    assert r.code == 0 and "COLOCATION BROKEN" in r.out and "'w'" in r.out
    assert json.loads(cli(*args, "--json").out)["colocation_ok"] is False
    together = {"devices": {"s": "/device:GPU:0", "x": "/device:GPU:1", "y": "/device:GPU:1", "j": "/device:GPU:0"}}
    (fork_files / "p.json").write_text(json.dumps(together))
    r = cli(*args)
    assert r.code == 0 and "COLOCATION" not in r.out
    assert json.loads(cli(*args, "--json").out)["colocation_ok"] is True
