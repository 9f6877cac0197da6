"""`from_graphdef` on dimensions no input fixes: an error naming --unknown-dim, or an estimate recorded in meta."""

import pytest

from placer.errors import ModelImportError
from placer.importers.graphdef import from_graphdef


@pytest.fixture(scope="module")
def sparse_update():
    """A DLRM-style step: rows gathered by id, summed per segment (as a sparse gradient is), so the
    segment sum's row count (max id + 1) depends on the ids' values. Batch unknown."""
    import tensorflow as tf

    table = tf.Variable(tf.ones([50, 16]))

    @tf.function
    def step(ids):
        rows = tf.gather(table.read_value(), ids)
        grad = tf.math.unsorted_segment_sum(rows, ids, tf.reduce_max(ids) + 1)
        return tf.reduce_sum(grad)

    cf = step.get_concrete_function(tf.TensorSpec([None], tf.int32))
    return cf.graph.as_graph_def(add_shapes=True)


def test_a_data_dependent_dimension_names_the_option_not_batch(sparse_update):
    with pytest.raises(ModelImportError) as e:
        from_graphdef(sparse_update, "dlrm", batch_size=8, find_fetches=True)
    message = str(e.value)
    assert "UnsortedSegmentSum" in message and "['?', 16]" in message
    assert "--unknown-dim N" in message and "--batch" not in message and "batch_size" not in message


def test_the_estimate_fills_it_and_is_recorded(sparse_update):
    g = from_graphdef(sparse_update, "dlrm", batch_size=8, unknown_dim=40, find_fetches=True)
    segment = next(op for op in g if op.op == "UnsortedSegmentSum")
    assert segment.output_shapes == [[40, 16]] and segment.output_bytes == 40 * 16 * 4
    assert g.meta["unknown_dims"] == {"estimate": 40, "by": "unknown_dim", "ops": [segment.name]}
    assert g.meta["variable_bytes"] == 50 * 16 * 4


@pytest.mark.parametrize("bad", [0, -3, True, 2.5])
def test_the_estimate_must_be_a_positive_integer(sparse_update, bad):
    with pytest.raises(ModelImportError, match=r"\(--unknown-dim\) must be a positive integer"):
        from_graphdef(sparse_update, "dlrm", batch_size=8, unknown_dim=bad)


def test_variables_without_shapes_are_an_error_even_with_an_estimate():
    """The GPT case: a GraphDef written without add_shapes=True once imported with 0 B of variables."""
    import tensorflow as tf

    w = tf.Variable(tf.ones([4, 4]))

    @tf.function
    def f(x):
        return tf.matmul(x, w)

    plain = f.get_concrete_function(tf.TensorSpec([2, 4])).graph.as_graph_def()
    with pytest.raises(ModelImportError, match=r"as_graph_def\(add_shapes=True\)"):
        from_graphdef(plain, "f", unknown_dim=7)


def test_a_variable_read_without_a_recorded_shape_says_so():
    """tf.gather of a variable reads it with ResourceGather, whose GraphDef holds no shape of the variable:
    an error where the read's shape is unknown too, else listed as a resource of unknown size (0 bytes)."""
    import tensorflow as tf

    table = tf.Variable(tf.ones([50, 16]))

    def f(ids):
        return tf.reduce_sum(tf.gather(table, ids))

    free = tf.function(f).get_concrete_function(tf.TensorSpec([None], tf.int32)).graph.as_graph_def(add_shapes=True)
    with pytest.raises(ModelImportError, match=r"op 'Gather' \(ResourceGather\).*the variable it reads .* has no "
                                               r"shape in the GraphDef .*import the SavedModel or .keras file"):
        from_graphdef(free, "f", batch_size=4, unknown_dim=3)
    fixed = tf.function(f).get_concrete_function(tf.TensorSpec([4], tf.int32)).graph.as_graph_def(add_shapes=True)
    g = from_graphdef(fixed, "f")
    assert g.meta["unsized_resources"] == ["Gather/resource"] and g.meta["variable_bytes"] == 0
