"""`placer validate`."""

import json

from placer.graph_io import save_graph
from placer.synthetic import layered_graph


def test_valid_graph(cli, tmp_path):
    path = tmp_path / "g.json.gz"
    save_graph(layered_graph(40), path)
    r = cli("validate", path, "--json")
    assert r.code == 0
    summary = json.loads(r.out)
    assert summary["num_ops"] == 40 and summary["valid"] is True


def test_invalid_graph_is_one_line(cli, tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"name": "g", "nodes": [{"name": "a", "op": "T", "flops": -3}]}))
    r = cli("validate", path)
    assert r.code == 1
    assert r.err.count("\n") == 1 and "op 'a': 'flops' must not be negative" in r.err
    assert "Traceback" not in r.err


def test_missing_file(cli, tmp_path):
    r = cli("validate", tmp_path / "none.json")
    assert r.code == 1 and "no such file" in r.err


def test_a_lone_surrogate_is_named_not_an_internal_error(cli, tmp_path):
    """JSON's \\ud800 escape can carry what UTF-8 cannot; gzip or not, the file is refused saying where."""
    import gzip

    text = '{"name": "g", "nodes": [{"name": "a\\ud800", "op": "T"}]}'
    for path, data in ((tmp_path / "s.json", text.encode()), (tmp_path / "s.json.gz", gzip.compress(text.encode()))):
        path.write_bytes(data)
        r = cli("validate", path)
        assert r.code == 1 and r.err.count("\n") == 1, r.err
        assert "op 'a\\ud800' (nodes[0]) name" in r.err and "U+D800" in r.err and "internal error" not in r.err
