"""OpGraph: validation (every error names the op), structure, networkx round trip."""

import math

import pytest

from placer.errors import GraphError
from placer.graph import Op, OpGraph


def node(name, inputs=(), **kw):
    return {"name": name, "op": "T", "inputs": list(inputs), **kw}


def make(*nodes):
    return OpGraph.from_dict({"name": "g", "nodes": list(nodes)})


class TestValidation:
    def test_a_valid_graph(self):
        g = make(node("a", output_bytes=4, flops=2.0), node("b", ["a", "a"], cost={"gpu": 1e-3}))
        assert len(g) == 2 and g.num_edges == 1
        assert g["b"].cost == {"gpu": 1e-3}

    def test_cycle(self):
        with pytest.raises(GraphError, match="cycle"):
            make(node("a", ["c"]), node("b", ["a"]), node("c", ["b"]))

    def test_cycle_names_an_op_on_it_not_one_downstream(self):
        """'d' only reads from the cycle a -> b -> c -> a; the error names the cycle itself."""
        with pytest.raises(GraphError, match=r"op 'a': is on a cycle \('a' -> 'b' -> 'c' -> 'a'\)"):
            make(node("x"), node("d", ["c"]), node("a", ["x", "c"]), node("b", ["a"]), node("c", ["b"]))

    def test_integer_too_large_for_a_float(self):
        """JSON allows integers of any length; one no float holds is an error, not an OverflowError."""
        with pytest.raises(GraphError, match="op 'a': 'flops' must be finite, got an integer too large"):
            make(node("a", flops=10**400))

    @pytest.mark.parametrize("field, value", [
        ("flops", 1.7e308), ("output_bytes", 1.7e308), ("param_bytes", 1.7e308), ("transfer_time", 1.7e308),
        ("cost", {"gpu": 1.7e308}),
    ])
    def test_totals_that_overflow_a_float(self, field, value):
        """Each finite, but two add up to infinity: the simulator's step time or memory came out Infinity."""
        what = "cost\\['gpu'\\]" if field == "cost" else f"'{field}'"
        with pytest.raises(GraphError, match=f"graph 'g': the ops' .*{what}.* more than a float holds"):
            make(node("a", **{field: value}), node("b", ["a"], **{field: value}))

    def test_self_loop(self):
        with pytest.raises(GraphError, match="op 'a'.*cycle"):
            make(node("a", ["a"]))

    def test_missing_input(self):
        with pytest.raises(GraphError, match="op 'b': input 'nope' names no op"):
            make(node("a"), node("b", ["nope"]))

    def test_duplicate_name(self):
        with pytest.raises(GraphError, match="op 'a': duplicate name"):
            make(node("a"), node("a"))

    @pytest.mark.parametrize("field", ["output_bytes", "flops", "param_bytes"])
    def test_negative_size(self, field):
        with pytest.raises(GraphError, match=f"op 'a': '{field}' must not be negative"):
            make(node("a", **{field: -1}))

    @pytest.mark.parametrize("value", [math.inf, math.nan])
    def test_non_finite_size(self, value):
        with pytest.raises(GraphError, match="op 'a': 'flops' must be finite"):
            make(node("a", flops=value))

    def test_negative_cost(self):
        with pytest.raises(GraphError, match=r"op 'a': cost\['gpu'\] must not be negative"):
            make(node("a", cost={"gpu": -1.0}))

    def test_non_finite_cost(self):
        with pytest.raises(GraphError, match=r"op 'a': cost\['cpu'\] must be finite"):
            make(node("a", cost={"cpu": math.inf}))

    @pytest.mark.parametrize("bad, message", [
        ({"output_bytes": "12"}, "'output_bytes' must be a number"),
        ({"flops": True}, "'flops' must be a number"),
        ({"inputs": "a"}, "'inputs' must be a list"),
        ({"output_shapes": [[2, -1]]}, "'output_shapes'"),
        ({"output_shapes": [2, 3]}, "'output_shapes'"),
        ({"cost": [1.0]}, "'cost' must be an object"),
        ({"colocation": 3}, "'colocation' must be a string"),
        ({"op": ""}, "'op' must be a non-empty string"),
        ({"shape": [1]}, "unknown field"),
    ])
    def test_wrong_types(self, bad, message):
        with pytest.raises(GraphError, match=f"op 'x': {message}"):
            make({**node("x"), **bad})

    def test_node_without_a_name(self):
        with pytest.raises(GraphError, match="node #1: 'name'"):
            make(node("a"), {"op": "T"})

    def test_empty_graph(self):
        with pytest.raises(GraphError, match="has no ops"):
            OpGraph.from_dict({"name": "g", "nodes": []})

    @pytest.mark.parametrize("data, message", [
        ([], "expected a JSON object"),
        ({"nodes": []}, "'name'"),
        ({"name": "g"}, "'nodes' must be a list"),
        ({"name": "g", "nodes": [], "meta": 3}, "'meta'"),
        ({"name": "g", "nodes": [], "metadata": {}}, r"unknown top-level field\(s\) \['metadata'\]"),
        ({"name": "g", "nodes": [{"name": "a", "op": "T"}], "meta": {"x": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}},
         "'meta' is nested more than 32 levels deep"),
        ({"name": "g", "nodes": [{"name": "a", "op": "T"}], "meta": {"batch": 8, "timing": {"s": [1.0, float("nan")]}}},
         r"'meta.timing.s.1' is not a finite number"),
        ({"name": "g", "nodes": [{"name": "a", "op": "T"}], "meta": {"x": float("inf")}}, r"'meta.x' is not a finite"),
    ])
    def test_top_level(self, data, message):
        with pytest.raises(GraphError, match=message):
            OpGraph.from_dict(data)

    def test_ops_built_in_python_are_checked_too(self):
        with pytest.raises(GraphError, match="op 'a': 'output_bytes' must not be negative"):
            OpGraph("g", [Op("a", "T", output_bytes=-5)])


class TestStructure:
    def test_topological_order_prefers_file_order(self):
        g = make(node("c", ["a"]), node("a"), node("b"))
        assert [g.ops[i].name for i in g.topo_order] == ["a", "c", "b"]
        assert g.topo_rank[g.index["a"]] == 0

    def test_predecessors_and_successors_are_distinct(self):
        g = make(node("a"), node("b", ["a", "a"]), node("c", ["a", "b"]))
        s_off, s_idx = g.successors
        assert s_idx[s_off[0]:s_off[1]].tolist() == [1, 2]
        p_off, p_idx = g.predecessors
        assert p_idx[p_off[2]:p_off[3]].tolist() == [0, 1]

    def test_colocation_groups(self):
        g = make(node("v", colocation="v"), node("r", ["v"], colocation="v"), node("x", ["r"]))
        assert g.colocation_groups() == {"v": [0, 1]}


class TestConversion:
    def test_dict_round_trip(self):
        g = make(node("a", output_shapes=[[2, 3]], output_bytes=24, flops=6, param_bytes=8,
                      cost={"gpu": 1e-5}, colocation="a", transfer_time=0.5),
                 node("b", ["a"]))
        again = OpGraph.from_dict(g.to_dict())
        assert [op.to_dict() for op in again.ops] == [op.to_dict() for op in g.ops]

    def test_networkx_round_trip(self):
        g = make(node("a", output_bytes=24, flops=6), node("b", ["a"], cost={"cpu": 2.0}))
        nxg = g.to_networkx()
        assert list(nxg.edges) == [("a", "b")]
        assert nxg.nodes["a"]["flops"] == 6
        again = OpGraph.from_networkx(nxg)
        assert [op.to_dict() for op in again.ops] == [op.to_dict() for op in g.ops]

    def test_from_plain_networkx_graph(self):
        import networkx as nx

        nxg = nx.DiGraph([("x", "y"), ("y", "z")])
        g = OpGraph.from_networkx(nxg)
        assert g["z"].inputs == ["y"] and g["x"].op == "Unknown"

    def test_from_cyclic_networkx_graph(self):
        import networkx as nx

        with pytest.raises(GraphError, match="cycle"):
            OpGraph.from_networkx(nx.DiGraph([("x", "y"), ("y", "x")]))


def test_a_placement_read_as_a_graph_says_what_it_is():
    """`validate` on a placement file listed nine unknown top-level fields."""
    from placer.errors import GraphError

    with pytest.raises(GraphError, match="this is a placement .* not a graph; `placer simulate GRAPH --placement"):
        OpGraph.from_dict({"graph": "g", "cluster": "4gpu", "method": "single", "devices": {"a": "/device:GPU:0"}})


def test_a_cluster_read_as_a_graph_says_what_it_is():
    from placer import presets
    from placer.errors import GraphError

    with pytest.raises(GraphError, match="this is a cluster .* not a graph; --cluster FILE reads one"):
        OpGraph.from_dict(presets.get("2gpu").to_dict())
