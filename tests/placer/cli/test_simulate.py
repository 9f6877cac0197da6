"""`placer simulate`."""

import json

import pytest

from placer.graph import Op, OpGraph
from placer.graph_io import save_graph


@pytest.fixture
def files(tmp_path):
    g = OpGraph("fork", [
        Op("s", "T", cost={"gpu": 1e-3}, output_bytes=12e6),
        Op("x", "T", ["s"], cost={"gpu": 4e-3}, output_bytes=12e6),
        Op("y", "T", ["s"], cost={"gpu": 4e-3}, output_bytes=12e6),
        Op("j", "T", ["x", "y"], cost={"gpu": 1e-3}),
    ])
    save_graph(g, tmp_path / "g.json")
    placement = {"devices": {"s": "/device:GPU:0", "x": "/device:GPU:0", "y": "/device:GPU:1", "j": "/device:GPU:0"}}
    (tmp_path / "p.json").write_text(json.dumps(placement))
    return tmp_path


def test_json_output(cli, files):
    r = cli("simulate", files / "g.json", "--cluster", "2gpu", "--placement", files / "p.json", "--json")
    assert r.code == 0, r.err
    out = json.loads(r.out)
    # s 0-1 ms; send 10 us + 12e6 / 12e9 s = 1.01 ms each way; y 2.01-6.01; back 6.01-7.02; j 7.02-8.02
    assert out["step_time"] == pytest.approx(8.02e-3)
    assert out["oom"] is False and out["bytes_moved"] == 24e6
    assert set(out["peak_memory"]) == {"/device:CPU:0", "/device:GPU:0", "/device:GPU:1"}


def test_table_output(cli, files):
    r = cli("simulate", files / "g.json", "--cluster", "2gpu", "--placement", files / "p.json")
    assert r.code == 0 and "step time 8.020 ms" in r.out and "/device:GPU:1" in r.out


def test_unknown_device(cli, files):
    (files / "bad.json").write_text(json.dumps({"devices": {"s": "/device:GPU:9", "x": "a", "y": "a", "j": "a"}}))
    r = cli("simulate", files / "g.json", "--cluster", "2gpu", "--placement", files / "bad.json")
    assert r.code == 1 and "'/device:GPU:9'" in r.err and r.err.count("\n") == 1


def test_unknown_cluster(cli, files):
    r = cli("simulate", files / "g.json", "--cluster", "3gpu", "--placement", files / "p.json")
    assert r.code == 1 and "unknown cluster '3gpu'" in r.err


def test_placement_not_an_object(cli, files):
    (files / "bad.json").write_text("[1, 2]")
    r = cli("simulate", files / "g.json", "--cluster", "2gpu", "--placement", files / "bad.json")
    assert r.code == 1 and "'devices'" in r.err
