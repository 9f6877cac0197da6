"""`placer place`: one method's placement, written and printed."""

import json

import pytest

from placer.cli.main import main


@pytest.fixture
def graph_file(layered_graph_file):
    return layered_graph_file(60, seed=3)


def test_place_writes_the_placement_contract(graph_file, tmp_path, capsys):
    """-o writes a Placement with a simulated step time and a device for every op."""
    out = tmp_path / "p.json"
    assert main(["place", str(graph_file), "--cluster", "2gpu", "--method", "heft", "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["method"] == "heft" and data["cluster"] == "2gpu"
    assert len(data["devices"]) == 60
    assert data["step_time"] > 0 and data["oom"] is False
    assert "wrote" in capsys.readouterr().out


def test_place_json_output(graph_file, capsys):
    assert main(["place", str(graph_file), "--cluster", "4gpu", "--method", "round_robin", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data["devices"].values()) == {f"/device:GPU:{i}" for i in range(4)}
    assert data["lower_bound"] <= data["step_time"]


@pytest.mark.parametrize("argv, message", [
    (["--method", "nope", "--cluster", "2gpu"], "unknown method 'nope'"),
    (["--method", "heft", "--cluster", "nowhere"], "unknown cluster 'nowhere'"),
])
def test_place_bad_input_is_one_line(graph_file, capsys, argv, message):
    assert main(["place", str(graph_file), *argv]) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_place_missing_graph(tmp_path, capsys):
    assert main(["place", str(tmp_path / "none.json"), "--cluster", "2gpu", "--method", "single"]) == 1
    assert "no such file" in capsys.readouterr().err
