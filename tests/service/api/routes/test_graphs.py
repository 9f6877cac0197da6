"""Routes /v1/graphs: upload in each format, list, fetch, delete, and every upload error."""

from __future__ import annotations

import gzip
import json

import pytest

from placer.synthetic import layered_graph
from tests.service.conftest import gz, tiny_graph


class TestUpload:
    def test_json(self, client):
        """A JSON graph is stored and summarised."""
        r = client.post("/v1/graphs", json=tiny_graph())
        assert r.status_code == 201
        body = r.json()
        assert body["name"] == "tiny" and body["num_ops"] == 3 and body["num_edges"] == 2
        assert body["source"] == "json" and body["id"].startswith("g_")

    def test_gzip_json(self, client):
        """Gzip is recognised from the bytes, whatever the content type says."""
        r = client.post("/v1/graphs", content=gz(tiny_graph()), headers={"content-type": "application/gzip"})
        assert r.status_code == 201
        assert r.json()["source"] == "json+gzip"

    def test_name_overrides(self, client):
        """?name= renames the uploaded graph."""
        r = client.post("/v1/graphs?name=renamed", json=tiny_graph())
        assert r.json()["name"] == "renamed"

    def test_malformed_json(self, client):
        """Broken JSON is a 422 that says where it broke."""
        r = client.post("/v1/graphs", content=b'{"name": "x", "nodes": [', headers={"content-type": "application/json"})
        assert r.status_code == 422
        assert "not valid JSON" in r.json()["detail"]

    def test_deeply_nested_json(self, client):
        """A 422, not a 500: nested thousands deep (the parser recursed), or a 'meta' stored too deep to be
        sent back (every later GET with include_graph was a 500)."""
        graph = b'{"name": "g", "nodes": [{"name": "a", "op": "T"}], "meta": %s1%s}'
        r = client.post("/v1/graphs", content=graph % (b'{"x": ' * 5000, b"}" * 5000))
        assert r.status_code == 422 and "nested too deeply" in r.json()["detail"]
        r = client.post("/v1/graphs", content=graph % (b'{"x": ' * 900, b"}" * 900))
        assert r.status_code == 422 and "nested more than 32 levels deep" in r.json()["detail"]

    def test_empty_body(self, client):
        """No body is a 422, not a crash."""
        r = client.post("/v1/graphs", content=b"")
        assert r.status_code == 422
        assert "empty" in r.json()["detail"]

    def test_schema_violation_names_the_op(self, client):
        """A negative size is refused, naming the op and the field."""
        g = tiny_graph()
        g["nodes"][1]["flops"] = -1
        r = client.post("/v1/graphs", json=g)
        assert r.status_code == 422
        assert "'mm'" in r.json()["detail"] and "flops" in r.json()["detail"]

    def test_cycle(self, client):
        """A cycle is refused, naming an op on it."""
        g = tiny_graph()
        g["nodes"][0]["inputs"] = ["out"]
        r = client.post("/v1/graphs", json=g)
        assert r.status_code == 422
        assert "cycle" in r.json()["detail"]

    def test_dangling_input(self, client):
        """An input naming no op is refused, naming both."""
        g = tiny_graph()
        g["nodes"][2]["inputs"] = ["ghost"]
        r = client.post("/v1/graphs", json=g)
        assert r.status_code == 422
        assert "'ghost'" in r.json()["detail"]

    def test_corrupt_gzip(self, client):
        """Truncated gzip is a 422 naming gzip."""
        r = client.post("/v1/graphs", content=gz(tiny_graph())[:20])
        assert r.status_code == 422
        assert "gzip" in r.json()["detail"]

    def test_body_over_limit(self, make_client):
        """A body over max_upload_bytes is a 413, announced or streamed."""
        client = make_client(max_upload_bytes=1000)
        r = client.post("/v1/graphs", content=b"{" + b" " * 2000 + b"}")
        assert r.status_code == 413
        assert "max_upload_bytes; raise it with PLACER_MAX_UPLOAD_BYTES" in r.json()["detail"]

        def chunks():
            for _ in range(5):
                yield b" " * 500

        r = client.post("/v1/graphs", content=chunks())
        assert r.status_code == 413

    def test_gzip_bomb(self, make_client):
        """Gzip that inflates past max_inflated_bytes is a 413 before it is all inflated."""
        client = make_client(max_inflated_bytes=10_000)
        bomb = gzip.compress(b"{" + b" " * 1_000_000 + b"}")
        assert len(bomb) < 5000
        r = client.post("/v1/graphs", content=bomb)
        assert r.status_code == 413
        assert "max_inflated_bytes; raise it with PLACER_MAX_INFLATED_BYTES" in r.json()["detail"]

    def test_too_many_ops(self, make_client):
        """A graph over max_ops is a 413 naming the limit and the variable that raises it."""
        client = make_client(max_ops=50)
        r = client.post("/v1/graphs", content=gz(layered_graph(51).to_dict()))
        assert r.status_code == 413
        assert r.json()["detail"] == ("graph: has 51 ops; this service accepts at most 50 "
                                      "(setting max_ops; raise it with PLACER_MAX_OPS)")

    def test_limits_scale_with_the_settings(self, make_client):
        """The same graph is refused under small limits and stored once they are raised: each limit is a
        setting, not a constant (a 100k-op graph needs the defaults, measured in docs/service.md)."""
        body = gz(layered_graph(400).to_dict())
        raw = json.dumps(layered_graph(400).to_dict()).encode()
        small = make_client(max_ops=399, max_upload_bytes=len(body) + 10, max_inflated_bytes=len(raw) - 1)
        for content in (body, raw):
            assert small.post("/v1/graphs", content=content).status_code == 413
        big = make_client(max_ops=400, max_upload_bytes=len(raw) + 10, max_inflated_bytes=len(raw))
        for content in (body, raw):
            r = big.post("/v1/graphs", content=content)
            assert r.status_code == 201 and r.json()["num_ops"] == 400

    def test_bad_format_param(self, client):
        """An unknown ?format= is a 422."""
        r = client.post("/v1/graphs?format=onnx", json=tiny_graph())
        assert r.status_code == 422

    def test_graphdef_garbage(self, client):
        """Bytes that are neither JSON nor a GraphDef are a 422 naming the problem."""
        r = client.post("/v1/graphs?format=graphdef", content=b"\x00\xffnot a protobuf\x13",
                        headers={"content-type": "application/octet-stream"})
        assert r.status_code == 422
        assert r.json()["detail"]


class TestReadDelete:
    def test_list_get_delete(self, client, graph_id):
        """A stored graph is listed, fetched (with its body when asked) and deleted."""
        listed = client.get("/v1/graphs").json()
        assert [g["id"] for g in listed["data"]] == [graph_id] and listed["count"] == 1
        got = client.get(f"/v1/graphs/{graph_id}").json()
        assert got["num_ops"] == 3 and got["graph"] is None
        full = client.get(f"/v1/graphs/{graph_id}?include_graph=true").json()
        assert [n["name"] for n in full["graph"]["nodes"]] == ["x", "mm", "out"]
        assert client.delete(f"/v1/graphs/{graph_id}").status_code == 204
        assert client.get(f"/v1/graphs/{graph_id}").status_code == 404
        assert client.delete(f"/v1/graphs/{graph_id}").status_code == 404

    def test_paging(self, client):
        """limit and offset page through graphs in upload order."""
        ids = [client.post("/v1/graphs", json=tiny_graph(f"g{i}")).json()["id"] for i in range(3)]
        page = client.get("/v1/graphs?limit=2&offset=1").json()
        assert [g["id"] for g in page["data"]] == ids[1:]
        assert client.get("/v1/graphs?limit=0").status_code == 422

    def test_unknown_id(self, client):
        """An unknown id is a 404 naming it."""
        r = client.get("/v1/graphs/g_0000000000000000")
        assert r.status_code == 404
        assert "g_0000000000000000" in r.json()["detail"]


class TestGraphDef:
    def test_binary_and_text(self, client):
        """A TensorFlow GraphDef, binary or text, goes through the importer."""
        import tensorflow as tf
        from google.protobuf import text_format

        @tf.function
        def step(x):
            return tf.nn.relu(tf.matmul(x, tf.ones([4, 4])))

        gd = step.get_concrete_function(tf.TensorSpec([2, 4], tf.float32)).graph.as_graph_def()
        r = client.post("/v1/graphs?name=mlp", content=gd.SerializeToString(),
                        headers={"content-type": "application/octet-stream"})
        assert r.status_code == 201, r.text
        assert r.json()["source"] == "graphdef" and r.json()["name"] == "mlp" and r.json()["num_ops"] >= 2
        r = client.post("/v1/graphs?format=graphdef", content=text_format.MessageToString(gd).encode(),
                        headers={"content-type": "text/plain"})
        assert r.status_code == 201, r.text
        assert r.json()["source"] == "graphdef-text"

    def test_fetch_prunes_what_the_step_does_not_run(self, client):
        """?fetch= names what one step runs; nodes it does not need are left out of the stored graph, as
        `placer import --fetch` leaves them out (a tensor name stands for its node). Without it, a tf.function's
        outputs are found, as `placer import` finds them."""
        import tensorflow as tf

        @tf.function
        def step(x):
            tf.square(x, name="unused")
            return tf.nn.relu(tf.matmul(x, tf.ones([4, 4])), name="out")

        body = step.get_concrete_function(tf.TensorSpec([2, 4], tf.float32)).graph.as_graph_def().SerializeToString()
        headers = {"content-type": "application/octet-stream"}
        found = client.post("/v1/graphs", content=body, headers=headers).json()
        pruned = client.post("/v1/graphs?fetch=out:0", content=body, headers=headers)
        assert pruned.status_code == 201, pruned.text
        names = {n["name"] for n in client.get(f"/v1/graphs/{pruned.json()['id']}?include_graph=true")
                 .json()["graph"]["nodes"]}
        assert "out" in names and "unused" not in names
        graph = client.get(f"/v1/graphs/{found['id']}?include_graph=true").json()["graph"]
        assert "unused" not in {n["name"] for n in graph["nodes"]}
        assert graph["meta"]["fetches_from"] == "tf.function outputs"
        r = client.post("/v1/graphs?fetch=nope", content=body, headers=headers)
        assert r.status_code == 422 and "fetch 'nope' names no node" in r.json()["detail"]
        r = client.post("/v1/graphs?fetch=out%00x", content=body, headers=headers)  # was a 500 (an argv NUL)
        assert r.status_code == 422 and r.json()["detail"] == "fetch 'out\\x00x' names no node of the graph"

    def test_unknown_batch_is_given_by_the_batch_parameter(self, client):
        """A step traced with a free batch dimension cannot be imported as it is: the message says to give
        ?batch=B (it told the user to give --batch or input_shapes, which an upload had no way to give), and
        ?batch=B imports it, as 'placer import --batch'."""
        import tensorflow as tf

        @tf.function
        def step(x):
            return tf.nn.relu(x)

        body = step.get_concrete_function(tf.TensorSpec([None, 4], tf.float32)).graph.as_graph_def().SerializeToString()
        headers = {"content-type": "application/octet-stream"}
        r = client.post("/v1/graphs", content=body, headers=headers)
        assert r.status_code == 422
        assert r.json()["detail"] == ("upload: placeholder 'x' has unknown shape [?, 4]; give the batch size "
                                      "(?batch=B), or import it with 'placer import --input-shape NODE=D1,D2,...' "
                                      "and upload the JSON graph")
        r = client.post("/v1/graphs?batch=8", content=body, headers=headers)
        assert r.status_code == 201, r.text
        graph = client.get(f"/v1/graphs/{r.json()['id']}?include_graph=true").json()["graph"]
        assert next(n for n in graph["nodes"] if n["name"] == "x")["output_shapes"] == [[8, 4]]
        assert client.post("/v1/graphs?batch=0", content=body, headers=headers).status_code == 422

    @pytest.mark.parametrize("param, to", [("fetch=out", "a GraphDef upload"),
                                           ("batch=8", "an upload of a model (GraphDef, SavedModel or .keras file)")])
    def test_graphdef_options_on_a_json_graph_are_refused(self, client, param, to):
        """A JSON graph is stored as sent: ?fetch= or ?batch= there would silently do nothing, so it is a 422."""
        r = client.post(f"/v1/graphs?{param}", json=tiny_graph())
        assert r.status_code == 422
        assert r.json()["detail"] == f"upload: {param.split('=')[0]} applies to {to}; a JSON graph is stored as sent"

    def test_graphdef_that_crashes_tensorflow(self, client):
        """A GraphDef whose function calls itself (TensorFlow's inliner segfaults on it) is a 422, and the
        service lives on: TensorFlow imports uploads in a child process."""
        from tensorflow.core.framework import graph_pb2, types_pb2

        gd = graph_pb2.GraphDef()
        f = gd.library.function.add()
        f.signature.name = "F"
        f.signature.output_arg.add(name="y", type=types_pb2.DT_INT32)
        f.node_def.add(name="call", op="F")
        f.ret["y"] = "call:y:0"
        gd.node.add(name="c", op="F")
        r = client.post("/v1/graphs?format=graphdef", content=gd.SerializeToString(),
                        headers={"content-type": "application/octet-stream"})
        assert r.status_code == 422
        assert "crashed" in r.json()["detail"]
        assert client.get("/healthz").status_code == 200


class TestUnicode:
    """A lone surrogate (JSON's ``\\ud800`` escape) in a name is a 422 naming the op (#41): stored, it made
    every later GET of the graph (and of its job) a 500, and the placement named an op that did not exist."""

    BAD = (b'{"name": "g", "nodes": [{"name": "x", "op": "Placeholder", "output_bytes": 8},'
           b' {"name": "bad\\ud800op", "op": "MatMul", "inputs": ["x"]}]}')

    @pytest.mark.parametrize("compress", [False, True])
    def test_upload_is_refused_naming_the_op(self, client, compress):
        body = gzip.compress(self.BAD) if compress else self.BAD
        r = client.post("/v1/graphs", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 422, r.text
        detail = r.json()["detail"]
        assert "op 'bad\\ud800op' (nodes[1]) name" in detail and "lone surrogate U+D800" in detail
        assert client.get("/v1/graphs").json()["count"] == 0

    def test_surrogate_pairs_are_fine(self, client):
        """An escaped character beyond the BMP is a valid pair, not a lone surrogate."""
        body = self.BAD.replace(b"\\ud800", b"\\ud83d\\ude00")
        r = client.post("/v1/graphs", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 201, r.text
        graph = client.get(f"/v1/graphs/{r.json()['id']}?include_graph=true").json()["graph"]
        assert graph["nodes"][1]["name"] == "bad\U0001F600op"

    def test_a_row_stored_before_is_answered_not_a_500(self, client):
        """A graph stored before surrogates were refused is still answered (escaped), not a 500 on each GET."""
        from placer.graph import OpGraph
        from service.graph_store import graph_record
        from tests.service.conftest import tiny_graph

        graph = tiny_graph()
        graph["nodes"][2]["name"] = "out\udc80"
        record = graph_record(OpGraph.from_dict(graph), "json")
        client.app.state.storage.add_graph(record=record)
        r = client.get(f"/v1/graphs/{record.id}?include_graph=true")
        assert r.status_code == 200 and b"out\\udc80" in r.content
