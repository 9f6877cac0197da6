"""PipeDream graph.txt importer on hand-written profiles."""

from __future__ import annotations

from pathlib import Path

import pytest

from placer.errors import ModelImportError
from placer.importers import pipedream

PROFILE = (
    "node1 -- Input -- forward_compute_time=900.000, backward_compute_time=0.000, activation_size=1024.0, "
    "parameter_size=0.000\n"
    "node2 -- Conv2d(3, 64, kernel_size=(3, 3)) -- forward_compute_time=2.500, backward_compute_time=5.000, "
    "activation_size=2048.000, parameter_size=1728.000\n"
    "node3 -- LSTM(64, 64) -- forward_compute_time=1.000, backward_compute_time=1.500, "
    "activation_size=[100.0; 20.0; 30.0], parameter_size=66048.000\n"
    "\tnode1 -- node2\n"
    "\tnode2 -- node3\n"
)
DATASET = Path(__file__).resolve().parents[3] / ".." / "shared" / "datasets" / "pipedream_profiles"


class TestGraphFromText:
    def test_fields(self):
        g = pipedream.graph_from_text(PROFILE, "tiny")
        conv, lstm = g["node2"], g["node3"]
        assert conv.op == "Conv2d" and lstm.op == "LSTM"
        assert conv.cost == {"gpu": pytest.approx(7.5e-3), "cpu": pytest.approx(7.5e-2)}
        assert conv.output_bytes == 2048 and conv.param_bytes == 1728
        assert lstm.output_bytes == 150  # a list of outputs: their sum
        assert lstm.inputs == ["node2"] and conv.inputs == ["node1"]

    def test_data_loading_input_is_zeroed_and_said(self):
        g = pipedream.graph_from_text(PROFILE, "tiny")
        assert g["node1"].cost["gpu"] == 0.0
        assert g.meta["zeroed_input_ms"] == {"node1": 900.0}

    def test_a_small_input_time_is_kept(self):
        text = PROFILE.replace("forward_compute_time=900.000", "forward_compute_time=3.000")
        g = pipedream.graph_from_text(text, "tiny")
        assert g["node1"].cost["gpu"] == pytest.approx(3e-3)
        assert "zeroed_input_ms" not in g.meta

    @pytest.mark.parametrize("text, message", [
        (PROFILE + "\tnode3 -- node9\n", "line 6: edge names layer 'node9'"),
        (PROFILE + "node2 -- ReLU -- forward_compute_time=1, backward_compute_time=1, activation_size=1, "
                   "parameter_size=0\n", "line 6: layer 'node2' is listed twice"),
        (PROFILE.replace("parameter_size=1728.000", "parameter_size=oops"), "line 2: not a PipeDream node line"),
        (PROFILE + "\tnode3 node1\n", "line 6: expected an edge"),
        (PROFILE.replace("backward_compute_time=5.000", "backward_compute_time=-5.000"), "negative"),
        ("", "no layers"),
    ])
    def test_bad_profiles_name_the_line(self, text, message):
        with pytest.raises(ModelImportError, match=message):
            pipedream.graph_from_text(text, "bad")

    def test_sniff_and_registry_loader(self):
        assert pipedream.sniff_bytes(PROFILE.encode())
        assert not pipedream.sniff_bytes(b'{"name": "g"}')
        assert len(pipedream.load_bytes(PROFILE.encode(), "x")) == 3

    def test_load_names_the_graph_after_its_folder(self, tmp_path):
        path = tmp_path / "resnet9" / "graph.txt"
        path.parent.mkdir()
        path.write_text(PROFILE)
        assert pipedream.load(path).name == "resnet9"


@pytest.mark.skipif(not DATASET.is_dir(), reason="the public datasets are not beside the clone (../shared/datasets)")
def test_published_profiles_zero_exactly_the_data_loaders():
    zeroed = {p.parent.name for p in DATASET.glob("*/*/graph.txt") if "zeroed_input_ms" in pipedream.load(p).meta}
    assert zeroed == {"alexnet", "resnet18", "squeezenet1_0"}
