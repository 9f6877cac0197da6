"""Graph files: JSON and gzip JSON, errors naming the file, agreement with the JSON Schema."""

import gzip
import json
import math
import re
from pathlib import Path

import jsonschema
import pytest

from placer.errors import GraphError, PlacerError
from placer.graph import OpGraph
from placer.graph_io import load_graph, save_graph
from placer.synthetic import layered_graph

SCHEMA = json.loads((Path(__file__).parents[2] / "placer" / "schemas" / "graph.schema.json").read_text())


@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_round_trip(tmp_path, suffix):
    g = layered_graph(50, seed=2)
    path = tmp_path / f"g{suffix}"
    save_graph(g, path)
    assert (path.read_bytes()[:2] == b"\x1f\x8b") == suffix.endswith(".gz")
    again = load_graph(path)
    assert again.to_dict() == g.to_dict()


def test_gzip_detected_by_content_not_name(tmp_path):
    path = tmp_path / "g.json"
    path.write_bytes(gzip.compress(json.dumps(layered_graph(5).to_dict()).encode()))
    assert len(load_graph(path)) == 5


def test_missing_file(tmp_path):
    with pytest.raises(PlacerError, match="no such file"):
        load_graph(tmp_path / "nope.json")


def test_a_folder_is_named_as_such(tmp_path):
    with pytest.raises(PlacerError, match=r"graph '.*': is a directory"):
        load_graph(tmp_path)


def test_not_json(tmp_path):
    path = tmp_path / "g.json"
    path.write_text("{not json")
    with pytest.raises(PlacerError, match=r"g.json.*not valid JSON \(.* line 1"):
        load_graph(path)


def test_binary_file(tmp_path):
    path = tmp_path / "g.pb"
    path.write_bytes(b"\x08\x96\x01\xff\xfe")
    with pytest.raises(PlacerError, match="not JSON"):
        load_graph(path)


def test_truncated_gzip(tmp_path):
    path = tmp_path / "g.json.gz"
    path.write_bytes(gzip.compress(b'{"name": "x", "nodes": []}' * 50)[:20])
    with pytest.raises(PlacerError, match="corrupt gzip"):
        load_graph(path)


def test_invalid_graph_names_file_and_op(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"name": "g", "nodes": [{"name": "a", "op": "T", "inputs": ["b"]}]}))
    with pytest.raises(GraphError, match=r"g.json.*op 'a': input 'b'"):
        load_graph(path)


class TestSchema:
    def test_saved_graphs_validate_against_the_schema(self):
        jsonschema.validate(layered_graph(30).to_dict(), SCHEMA)

    def test_documented_example_validates_and_loads(self):
        readme = (Path(__file__).parents[2] / "docs" / "graph-format.md").read_text()
        start = readme.index('{"name": "tiny"')
        example = json.loads(readme[start:readme.index("```", start)])
        jsonschema.validate(example, SCHEMA)
        assert len(OpGraph.from_dict(example)) == 2

    @pytest.mark.parametrize("bad", [
        {"name": "g", "nodes": []},
        {"name": "g", "nodes": [{"name": "a", "op": "T", "flops": -1}]},
        {"name": "g", "nodes": [{"name": "a", "op": "T", "cost": {"gpu": -1}}]},
        {"name": "g", "nodes": [{"name": "a", "op": "T", "output_shapes": [[-1]]}]},
        {"name": "g", "nodes": [{"name": "a", "op": "T", "extra": 1}]},
        {"name": "g", "nodes": [{"name": "a"}]},
    ])
    def test_schema_and_validator_reject_the_same_files(self, bad):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, SCHEMA)
        with pytest.raises(GraphError):
            OpGraph.from_dict(bad)


def test_gzip_with_bad_deflate_data(tmp_path):
    """A valid gzip header over bytes that are not deflate data: zlib's own error, reported as corrupt gzip."""
    path = tmp_path / "g.json.gz"
    path.write_bytes(b"\x1f\x8b\x08 not really gzip")
    with pytest.raises(PlacerError, match="corrupt gzip"):
        load_graph(path)


@pytest.mark.parametrize("digits", [400, 5000])
def test_an_integer_beyond_any_float_is_infinite_and_refused(tmp_path, digits):
    """JSON integers have no size limit: one beyond any float reads as infinity (so every file's validator refuses
    it as not finite) instead of an OverflowError later, or a ValueError from int() past 4,300 digits."""
    from placer.fileio import parse_json_bytes

    assert parse_json_bytes(b'{"x": -' + b"9" * digits + b"}") == {"x": -math.inf}
    path = tmp_path / "g.json"
    path.write_text('{"name": "g", "nodes": [{"name": "a", "op": "T", "flops": ' + "9" * digits + "}]}")
    with pytest.raises(GraphError, match="op 'a': 'flops' must be finite"):
        load_graph(path)


# A serialized GraphDef with one node, "a" of op Const (field 1 node; NodeDef fields 1 name, 2 op).
_GRAPHDEF = b"\x0a\x0a\x0a\x01a\x12\x05Const"


@pytest.mark.parametrize("name, data, what", [
    ("model.pb", _GRAPHDEF, "a TensorFlow GraphDef"),
    ("model.pb.gz", gzip.compress(_GRAPHDEF, mtime=0), "a TensorFlow GraphDef"),  # mtime: the same id on every worker
    ("model.pbtxt", b'node { name: "a" op: "Const" }\n', "a TensorFlow GraphDef (text)"),
    ("bert.json", json.dumps({"maxSizePerFPGA": 1, "maxFPGAs": 2, "maxCPUs": 1, "nodes": [], "edges": []}).encode(),
     "an MSR dnn-partitioning workload"),
])
def test_a_model_file_of_another_format_is_named_with_how_to_convert_it(tmp_path, name, data, what):
    """Not "not valid JSON" or "'name' must be a non-empty string": what the file is, and `placer import`."""
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(PlacerError, match=f"{re.escape(what)}, not a graph file; `placer import .*{name} -o GRAPH.json.gz`"):
        load_graph(path)


def test_text_that_is_not_json_is_not_called_a_graphdef(tmp_path):
    """A GraphDef is sniffed by its first byte, which a text file starting with a newline shares."""
    path = tmp_path / "g.json"
    path.write_bytes(b"\n[1, 2")
    with pytest.raises(PlacerError, match="not valid JSON") as e:
        load_graph(path)
    assert "GraphDef" not in str(e.value)


def test_json_nested_thousands_deep_is_one_clear_error(tmp_path):
    """Python's JSON parser recurses: this was a RecursionError (a 500 in the service), not a PlacerError."""
    path = tmp_path / "g.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(PlacerError, match="g.json.*JSON nested too deeply"):
        load_graph(path)
