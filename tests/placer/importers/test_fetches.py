"""`placer.importers.fetches`: a tf.function GraphDef's fetches found, as TensorFlow's function runtime runs it."""

import pytest

from placer.importers.fetches import function_fetches
from placer.importers.graphdef import from_graphdef
from placer.importers.keras_models import from_tf_function, keras_step

from .conftest import BATCH


@pytest.fixture(scope="module")
def dense_step(dense_model):
    return keras_step(dense_model, BATCH)


def test_a_keras_step_graphdef_imports_as_its_function_runs(dense_step):
    """Found from the GraphDef alone: the same ops the traced function's own outputs and control outputs keep."""
    graph_def = dense_step.graph_def()
    assert function_fetches(graph_def) == [t.op.name for t in dense_step.concrete_function().graph.outputs]
    found = from_graphdef(graph_def, "step", find_fetches=True)
    traced = from_tf_function(dense_step.concrete_function(), dense_step.signature, "step",
                              variable_paths=dense_step.variable_paths)
    assert set(found.index) == set(traced.index) and found.meta["pruned"] == traced.meta["pruned"]
    assert found.meta["fetches_from"] == "tf.function outputs" and sum(found.meta["pruned"].values()) > 0


def test_stateful_ops_run_though_nothing_returns_them():
    import tensorflow as tf

    v = tf.Variable(tf.zeros([3]))

    @tf.function
    def f(x):
        tf.square(x, name="dead")
        v.assign_add(x, name="update")
        return x * 2.0

    graph_def = f.get_concrete_function(tf.TensorSpec([3])).graph.as_graph_def(add_shapes=True)
    g = from_graphdef(graph_def, "f", find_fetches=True)
    assert "dead" not in g.index and any(op.op == "AssignAddVariableOp" for op in g)


def test_a_tf1_graph_is_not_taken_for_a_function():
    """Its fetches are a session's, which nothing in it names: every node is kept (--fetch chooses)."""
    import tensorflow as tf

    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 3], name="x")
        w = tf.compat.v1.get_variable("w", [3, 2], use_resource=True)
        loss = tf.identity(tf.reduce_sum(tf.matmul(x, w)))  # named "Identity", as a function's output is
        tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, name="train")
    assert function_fetches(g.as_graph_def()) is None
    assert "pruned" not in from_graphdef(g.as_graph_def(), "tf1", find_fetches=True).meta
