"""Longest paths through a DAG (`placer.dag`): exact answers on graphs small enough to check by hand."""

import numpy as np
import pytest

from placer import dag
from placer.graph import Op, OpGraph


def diamond() -> OpGraph:
    """a -> b -> d and a -> c -> d, listed out of topological order."""
    return OpGraph("diamond", [Op("d", "T", ["b", "c"]), Op("b", "T", ["a"]), Op("c", "T", ["a"]), Op("a", "T")])


W = np.array([8.0, 2.0, 5.0, 1.0])  # d, b, c, a
C = np.array([0.0, 3.0, 0.5, 1.0])


class TestDownwardRanks:
    def test_longest_path_to_each_node_excluding_it(self):
        assert dag.downward_ranks(diamond(), W).tolist() == [6.0, 1.0, 1.0, 0.0]

    def test_edge_costs_count_once_per_edge_out_of_the_producer(self):
        # b: a's 1 + 1; c: the same; d: max(b 2 + 2 + 3, c 2 + 5 + 0.5)
        assert dag.downward_ranks(diamond(), W, C).tolist() == [7.5, 2.0, 2.0, 0.0]

    def test_no_edge_costs_is_zero_edge_costs(self):
        g = diamond()
        assert dag.downward_ranks(g, W).tobytes() == dag.downward_ranks(g, W, np.zeros(4)).tobytes()


class TestUpwardRanks:
    def test_longest_path_from_each_node_including_it(self):
        assert dag.upward_ranks(diamond(), W).tolist() == [8.0, 10.0, 13.0, 14.0]

    def test_edge_costs_count_once_per_edge_out_of_the_node(self):
        # b: 2 + 3 + 8; c: 5 + 0.5 + 8; a: 1 + 1 + max(13, 13.5)
        assert dag.upward_ranks(diamond(), W, C).tolist() == [8.0, 13.0, 13.5, 15.5]

    def test_an_isolated_node_is_its_own_weight(self):
        assert dag.upward_ranks(OpGraph("one", [Op("x", "T")]), np.array([2.5])).tolist() == [2.5]


class TestLevels:
    def test_top_and_bottom_levels(self):
        top, bottom = dag.levels(diamond(), W)
        assert top.tolist() == [6.0, 1.0, 1.0, 0.0] and bottom.tolist() == [8.0, 10.0, 13.0, 14.0]

    def test_top_plus_bottom_is_the_longest_path_through_each_node(self):
        top, bottom = dag.levels(diamond(), W)
        assert (top + bottom).tolist() == [14.0, 11.0, 14.0, 14.0]


class TestCriticalPathLength:
    def test_the_longest_path(self):
        assert dag.critical_path_length(diamond(), W) == 14.0

    def test_no_nodes(self):
        class Empty:
            topo_order = np.zeros(0, dtype=np.int64)
            predecessors = (np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64))

        assert dag.critical_path_length(Empty(), np.zeros(0)) == 0.0

    def test_summed_from_the_entry_not_the_exit(self):
        """Floating point: (1e16 + 1) + 1 is 1e16 but 1e16 + (1 + 1) is not; the critical path is the forward
        sum, as the simulator's lower bound always was, whatever the upward ranks say."""
        chain = OpGraph("chain", [Op("a", "T"), Op("b", "T", ["a"]), Op("c", "T", ["b"])])
        w = np.array([1e16, 1.0, 1.0])
        assert dag.critical_path_length(chain, w) == (1e16 + 1.0) + 1.0 == 1e16
        assert dag.upward_ranks(chain, w)[0] == 1e16 + 2.0


@pytest.mark.parametrize("fn", [dag.downward_ranks, dag.upward_ranks])
def test_ranks_are_float64_in_graph_order(fn):
    out = fn(diamond(), W.astype(np.float32), C.astype(np.float32))
    assert out.dtype == np.float64 and out.shape == (4,)
