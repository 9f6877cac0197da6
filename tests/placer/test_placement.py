"""`placer.placement`: a placement's devices checked against a graph and a cluster."""

import pytest

from placer import presets
from placer.cluster import Cluster
from placer.errors import PlacementError
from placer.placement import Placement, Provenance
from placer.synthetic import layered_graph


def _placed(graph, names):
    return Placement(graph.name, "4gpu", "hand", {op.name: names[i % len(names)] for i, op in enumerate(graph.ops)})


def test_tensorflow_spellings_of_a_device_name_are_that_device():
    """"GPU:1", "/gpu:1" and the fully qualified name are how TF prints /device:GPU:1; they were refused."""
    graph, cluster = layered_graph(20, seed=1), presets.get("4gpu")
    exact = _placed(graph, ["/device:GPU:0", "/device:GPU:1", "/device:CPU:0"]).assignment(graph, cluster)
    other = _placed(graph, ["GPU:0", "/gpu:1", "/job:localhost/replica:0/task:0/device:CPU:0"])
    assert (other.assignment(graph, cluster) == exact).all()


def test_the_same_gpu_of_two_machines_is_two_devices():
    """With devices named by task, another spelling of task 1's GPU 0 is task 1's, never task 0's."""
    graph = layered_graph(20, seed=1)
    spec = presets.get("2gpu-flat").to_dict()
    names = ["/job:worker/replica:0/task:0/device:CPU:0", "/job:worker/replica:0/task:0/device:GPU:0",
             "/job:worker/replica:0/task:1/device:GPU:0"]
    spec["devices"] = [{**d, "name": n} for d, n in zip(spec["devices"], names)]
    spec["links"] = []
    cluster = Cluster.from_dict(spec)
    assert set(_placed(graph, ["/job:worker/task:1/gpu:0"]).assignment(graph, cluster).tolist()) == {2}
    assert set(_placed(graph, ["/job:worker/task:0/GPU:0"]).assignment(graph, cluster).tolist()) == {1}
    with pytest.raises(PlacementError, match="which cluster"):
        _placed(graph, ["/device:GPU:0"]).assignment(graph, cluster)


def test_a_device_the_cluster_lacks_is_still_refused():
    graph, cluster = layered_graph(20, seed=1), presets.get("4gpu")
    with pytest.raises(PlacementError, match="placed on 'GPU:9', which cluster '4gpu' does not have"):
        _placed(graph, ["GPU:9"]).assignment(graph, cluster)


def test_names_that_are_not_tensorflow_device_names_must_match_exactly():
    graph = layered_graph(20, seed=1)
    spec = presets.get("2gpu-flat").to_dict()
    spec["devices"] = [{**d, "name": f"dev{k}"} for k, d in enumerate(spec["devices"])]
    spec["links"] = []
    cluster = Cluster.from_dict(spec)
    assert set(_placed(graph, ["dev1"]).assignment(graph, cluster).tolist()) == {1}
    with pytest.raises(PlacementError, match="'DEV1'"):
        _placed(graph, ["DEV1"]).assignment(graph, cluster)


class TestProvenance:
    def test_the_contract_method_is_spelled_from_it(self):
        """Chosen by best: ``best:heft``; a refinement does not change the contract's method."""
        p = Placement("g", "c", "heft", {}, provenance=Provenance(chosen_by="best", refined_by=("search",)))
        assert p.label == "best:heft" and p.to_dict()["method"] == "best:heft" and p.method == "heft"
        assert Placement("g", "c", "heft", {}).to_dict()["method"] == "heft"

    def test_lineage_names_the_refinements(self):
        assert Provenance(refined_by=("search",)).lineage("heft") == "heft+search"
        assert Provenance().refined("search").refined("search").lineage("m_etf") == "m_etf+search+search"
        assert Provenance.of_lineage("heft+search") == ("heft", Provenance(refined_by=("search",)))
        assert Provenance.of_lineage("single_device:gpu:0") == ("single_device:gpu:0", Provenance())

    def test_a_chosen_placement_round_trips_its_method(self):
        p = Placement("g", "c", "heft", {"a": "x"}, provenance=Provenance(chosen_by="best"))
        again = Placement.from_dict(p.to_dict())
        assert again.to_dict() == p.to_dict() and again.method == "best:heft"
