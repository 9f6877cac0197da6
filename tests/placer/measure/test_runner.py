"""Running placed graphs for real: times, devices used, and clean errors."""

from __future__ import annotations

import math

import pytest

from placer.errors import PlacementError
from placer.graph import Op, OpGraph
from placer.measure import NoTensorFlowOrigin
from placer.measure.runner import Measurement, PlacedStep, measure_placement
from placer.placement import Placement
from tests.placer.measure.conftest import CPU0, CPU1


class TestPlacedStep:
    def test_times_are_positive_and_stable(self, tiny, split):
        """Two measurements of the same placement agree within a factor of 3 (the machine is shared)."""
        _, _, graph, graph_def = tiny
        with PlacedStep(graph, graph_def, split, 2) as step:
            first = step.measure(warmup=3, runs=15)
            second = step.measure(warmup=0, runs=15)
        for m in (first, second):
            assert all(t > 0 and math.isfinite(t) for t in m.step_times)
            assert min(m.step_times) <= m.median <= max(m.step_times)
            assert m.spread >= 0
        assert 1 / 3 < first.median / second.median < 3

    def test_ops_ran_on_both_devices_where_placed(self, tiny, split):
        """TF's step stats show every traced node on the device the placement pinned it to."""
        _, _, graph, graph_def = tiny
        with PlacedStep(graph, graph_def, split, 2) as step:
            ran = step.nodes_by_device()
            assert step.devices == [CPU0, CPU1]
        assert ran[CPU0] and ran[CPU1]
        for device, names in ran.items():
            for name in names:
                if name in split.devices:
                    assert split.devices[name] == device, name
        placed_ops = {n for n in graph.names if graph[n].op not in ("Placeholder",)}
        assert placed_ops <= ran[CPU0] | ran[CPU1]  # every op of the step ran

    def test_nodes_the_importer_pruned_do_not_run(self, tiny, split):
        """The step runs what the graph holds: the nodes TF would not run for the step's fetches (here the
        gradient with respect to the input batch) stay out of the measurement as they are out of the graph;
        a graph imported without fetches keeps them, and they run."""
        from placer.importers import from_graphdef

        _, _, graph, graph_def = tiny
        pruned = {n.name for n in graph_def.node if n.name not in graph.index and n.op not in ("Const", "NoOp")}
        assert pruned and graph.meta["pruned"]

        def ran(g):
            one = Placement(g.name, "local", "single", {op.name: CPU0 for op in g})
            with PlacedStep(g, graph_def, one, 1) as step:
                return set().union(*step.nodes_by_device().values())

        ran_pruned = ran(graph)
        assert not ran_pruned & pruned
        # and TF, fetching the same step, runs every op kept: none of them is one it would leave out
        assert {op.name for op in graph if op.op != "Placeholder"} <= ran_pruned
        assert pruned <= ran(from_graphdef(graph_def, "mlp", batch_size=4))

    def test_one_device_runs_everything_there(self, tiny):
        _, _, graph, graph_def = tiny
        one = Placement(graph.name, "local", "single", {op.name: "/cpu:0" for op in graph})
        m = measure_placement(graph, one, 2, graph_def=graph_def, warmup=1, runs=3)
        assert set(m.ops_per_device) == {CPU0}
        assert m.median > 0

    def test_training_step_updates_variables(self, tiny, split):
        """The variables' update ops run: a second traced step differs from the first (loss changes)."""
        _, _, graph, graph_def = tiny
        with PlacedStep(graph, graph_def, split, 2) as step:
            loss_name = graph.meta["outputs"][0]
            loss = step.tf_graph.get_tensor_by_name(f"{loss_name}:0")
            a = step.session.run(loss)
            step.run()
            b = step.session.run(loss)
        assert a != b


class TestErrors:
    def test_device_tensorflow_lacks(self, tiny):
        _, _, graph, graph_def = tiny
        gpu = Placement(graph.name, "2gpu", "x", {op.name: "/device:GPU:0" for op in graph})
        with pytest.raises(PlacementError, match="GPU:0, which TensorFlow does not have"):
            PlacedStep(graph, graph_def, gpu, 2)

    def test_more_cpus_than_made(self, tiny):
        _, _, graph, graph_def = tiny
        p = Placement(graph.name, "local:3", "x", {op.name: "/device:CPU:2" for op in graph})
        with pytest.raises(PlacementError, match="CPU:2"):
            PlacedStep(graph, graph_def, p, 2)

    def test_missing_and_unknown_ops(self, tiny, split):
        _, _, graph, graph_def = tiny
        partial = dict(split.devices)
        partial.pop(graph.ops[3].name)
        with pytest.raises(PlacementError, match="no device for op"):
            PlacedStep(graph, graph_def, Placement(graph.name, "local", "x", partial), 2)
        extra = dict(split.devices, ghost=CPU0)
        with pytest.raises(PlacementError, match="'ghost'"):
            PlacedStep(graph, graph_def, Placement(graph.name, "local", "x", extra), 2)

    def test_not_a_device(self, tiny):
        _, _, graph, graph_def = tiny
        p = Placement(graph.name, "local", "x", {op.name: "my laptop" for op in graph})
        with pytest.raises(PlacementError, match="not a TensorFlow device"):
            PlacedStep(graph, graph_def, p, 2)

    def test_graph_without_tensorflow_origin(self):
        g = OpGraph("hand", [Op("a", "MatMul"), Op("b", "Relu", ["a"])], {"source": "hand-written"})
        p = Placement("hand", "local", "x", {"a": CPU0, "b": CPU1})
        with pytest.raises(NoTensorFlowOrigin, match="carries no TensorFlow GraphDef"):
            measure_placement(g, p, 2)


def test_measurement_summary():
    m = Measurement.of([1.0, 2.0, 3.0, 4.0, 100.0], ["/device:CPU:0"], {})
    assert m.median == 3.0
    assert m.to_dict()["runs"] == 5 and m.to_dict()["max"] == 100.0
