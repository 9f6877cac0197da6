"""MSR dnn-partitioning importer: hand-written workloads, split files, one published value."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from placer.errors import ModelImportError
from placer.importers import msr
from placer.objectives import ThroughputModel

DATASET = Path(__file__).resolve().parents[3] / ".." / "shared" / "datasets" / "msr_dnn_partitioning"


def _workload() -> dict:
    """Two layers of a training graph: forward f1 -> f2, backward b2 -> b1, f1 -> b1.

    Colour classes pair each forward node with its backward node.
    """
    def node(nid, name, fpga, bwd, cc, size):
        return {"id": nid, "name": name, "fpgaLatency": fpga, "cpuLatency": 10 * fpga, "size": size,
                "supportedOnFpga": 1, "isBackwardNode": bwd, "colorClass": cc}

    return {
        "maxSizePerFPGA": 1000.0, "maxFPGAs": 2, "maxCPUs": 1,
        "nodes": [node(1, "f1", 1.0, 0, 1, 100.0), node(2, "f2", 2.0, 0, 2, 200.0),
                  node(3, "b2", 4.0, 1, 2, 0.0), node(4, "b1", 3.0, 1, 1, 0.0)],
        "edges": [{"sourceId": 1, "destId": 2, "cost": 0.5, "size": 64},
                  {"sourceId": 1, "destId": 4, "cost": 0.5, "size": 32},
                  {"sourceId": 2, "destId": 3, "cost": 0.25, "size": 16},
                  {"sourceId": 3, "destId": 4, "cost": 0.125, "size": 8}],
    }


class TestGraphFromMsr:
    def test_fields_are_kept_exactly(self):
        g = msr.graph_from_msr(_workload(), "tiny")
        f1, b1, b2 = g["f1"], g["b1"], g["b2"]
        assert f1.cost == {"gpu": 1.0, "cpu": 10.0}
        assert f1.param_bytes == 100.0
        assert f1.transfer_time == 0.5
        assert f1.output_bytes == 64  # the largest of its out-edges' sizes
        assert b1.transfer_time is None  # no out-edges
        assert (f1.op, b1.op) == ("Forward", "Backward")
        assert (f1.colocation, b1.colocation, b2.colocation) == ("1", "1", "2")
        assert sorted(b1.inputs) == ["b2", "f1"]
        assert g.meta["max_accelerators"] == 2 and g.meta["backward_ops"] == 2

    def test_cluster_has_cpu_then_accelerators(self):
        c = msr.cluster_from_msr(_workload(), "msr-tiny")
        assert c.device_names == ["/device:CPU:0", "/device:GPU:0", "/device:GPU:1"]
        assert [d.memory_bytes for d in c.devices[1:]] == [1000.0, 1000.0]

    def test_duplicate_names_get_the_id(self):
        data = _workload()
        data["nodes"][1]["name"] = "f1"
        g = msr.graph_from_msr(data, "dup")
        assert "f1#1" in g.index and "f1#2" in g.index
        assert g.meta["renamed_duplicates"] == ["f1#1", "f1#2"]

    def test_missing_colour_class_means_no_colocation(self):
        data = _workload()
        del data["nodes"][3]["colorClass"]
        g = msr.graph_from_msr(data, "t")
        assert g["b1"].colocation is None and g["f1"].colocation is None

    @pytest.mark.parametrize("mutate, message", [
        (lambda d: d["nodes"].append(dict(d["nodes"][0])), "node id 1 appears twice"),
        (lambda d: d["edges"].append({"sourceId": 1, "destId": 9, "cost": 0.5}), "node id 9"),
        (lambda d: d["edges"].append({"sourceId": 1, "destId": 3, "cost": 0.7}), "different costs"),
        (lambda d: d["edges"].append({"sourceId": 2, "destId": 2, "cost": 0.25}), "self-loop"),
        (lambda d: d["nodes"][0].update(fpgaLatency=-1), "fpgaLatency"),
        (lambda d: d["nodes"][0].pop("cpuLatency"), "has no 'cpuLatency'"),
        (lambda d: d.update(nodes=[]), "non-empty"),
    ])
    def test_bad_workloads_name_the_problem(self, mutate, message):
        data = _workload()
        mutate(data)
        with pytest.raises(ModelImportError, match=message):
            msr.graph_from_msr(data, "bad")

    def test_sniff(self):
        raw = json.dumps(_workload()).encode()
        assert msr.sniff_bytes(raw)
        assert not msr.sniff_bytes(b'{"name": "g", "nodes": []}')
        assert msr.load_bytes(raw, "x").name == "x"


class TestSplit:
    def test_forward_only_split_inferred_by_colour_class(self):
        data = _workload()
        split = {"cpus": [{"load": 0, "nodes": []}], "fpgas": [{"load": -1, "nodes": [1]}, {"load": -1, "nodes": [2]}],
                 "maxLoad": -1}
        p = msr.placement_from_split(data, split, "tiny", "msr-tiny")
        assert p.devices == {"f1": "/device:GPU:0", "f2": "/device:GPU:1", "b2": "/device:GPU:1", "b1": "/device:GPU:0"}
        assert p.meta["inferred_from_color_class"] == 2
        assert "published_max_load" not in p.meta

    def test_hand_computed_max_load_of_a_split(self):
        data = _workload()
        split = {"fpgas": [{"nodes": [1, 4]}, {"nodes": [2, 3]}], "cpus": [], "maxLoad": 7.25}
        g, c = msr.graph_from_msr(data, "tiny"), msr.cluster_from_msr(data, "msr-tiny")
        p = msr.placement_from_split(data, split, "tiny", "msr-tiny")
        # GPU0: f1 + b1 = 4, sends f1 0.5, receives b2 0.125 -> 4.625
        # GPU1: f2 + b2 = 6, receives f1 0.5, sends b2 0.125 -> 6.625
        loads = ThroughputModel(g, c).loads(p.assignment(g, c))
        assert loads.load.tolist() == [0.0, 4.625, 6.625]
        assert p.meta["published_max_load"] == 7.25

    @pytest.mark.parametrize("split, message", [
        ({"fpgas": [{"nodes": [1, 2, 3, 4, 5]}]}, "node id 5"),
        ({"fpgas": [{"nodes": [1, 2]}, {"nodes": [2]}]}, "placed twice"),
        ({"fpgas": [{"nodes": []}, {"nodes": []}, {"nodes": [1, 2, 3, 4]}]}, "the workload has 2 fpgas"),
        ({"fpgas": [{"nodes": [1]}]}, "'f2' .* no node of its colorClass"),
        ({"fpgas": "nope"}, "expected an object"),
        ({"name": "a graph", "nodes": []}, "expected an object with 'fpgas' and 'cpus'"),
        ({"fpgas": [{"nodes": [True, 2, 3, 4]}]}, "names node id True"),
        ({"fpgas": [{"nodes": [1, 2, 3, 4]}], "maxLoad": "big"}, "'maxLoad' must be a number"),
    ])
    def test_bad_splits_name_the_problem(self, split, message):
        with pytest.raises(ModelImportError, match=message):
            msr.placement_from_split(_workload(), split, "tiny", "msr-tiny")


@pytest.mark.skipif(not DATASET.is_dir(), reason="the public datasets are not beside the clone (../shared/datasets)")
class TestPublishedValues:
    def _max_load(self, workload: Path, split: Path) -> tuple[float, dict]:
        g, c, p = msr.load(workload), msr.load_cluster(workload), msr.load_split(workload, split)
        loads = ThroughputModel(g, c).loads(p.assignment(g, c))
        assert loads.memory_ok and loads.colocation_ok
        return loads.max_load, p.meta

    def test_resnet50_expert_split(self):
        """The dataset README: the experts' ResNet50 inference split has maxLoad 43.9183."""
        value, _ = self._max_load(DATASET / "throughput-inputs/LayerGraphs/resnet50_inference.json",
                                  DATASET / "human-experts/resnet50_inference_expert.json")
        assert value == pytest.approx(43.9183, abs=5e-5)

    def test_gnmt_training_dp_split_to_full_precision(self):
        """A training graph's DP split: backward nodes, colour classes, non-uniform transfer costs."""
        value, meta = self._max_load(DATASET / "throughput-inputs/LayerGraphs/gnmt_training.json",
                                     DATASET / "reproduced_outputs/LayerGraphs__gnmt_training.dp.json")
        assert value == pytest.approx(meta["published_max_load"], rel=1e-9)
        assert np.isclose(value, 107.0044, atol=5e-5)
