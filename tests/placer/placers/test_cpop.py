"""CPOP against the worked example of its paper (Topcuoglu, Hariri and Wu 2002), and on a graph it is for."""

import pytest

from placer.dag import downward_ranks, upward_ranks
from placer.graph import Op, OpGraph
from placer.placers import registry
from placer.placers.common import Problem
from placer.placers.cpop import cpop, critical_path
from placer.simulator import Simulator
from tests.placer.placers.paper_dags import CPOP_MAKESPAN, heft_paper_cluster, heft_paper_graph
from tests.placer.placers.test_all_placers import gpus


@pytest.fixture(scope="module")
def paper():
    graph, cluster = heft_paper_graph(), heft_paper_cluster()
    return graph, cluster, Problem.build(graph, cluster)


def tasks(graph, ops):
    return [graph.ops[i].name for i in ops if graph.ops[i].op == "Task"]


class TestPaperExample:
    def test_priorities_are_longest_paths_through_each_task(self, paper):
        """rank_u + rank_d; the entry task's, 108, is |CP| (n1's rank_u in the paper's Table 3)."""
        graph, _, problem = paper
        w, c = problem.times.mean(axis=1), problem.mean_comm_time()
        rank_d = downward_ranks(problem.graph, w, c)
        priority = upward_ranks(problem.graph, w, c) + rank_d
        assert rank_d[graph.index["n1"]] == 0.0
        assert rank_d[graph.index["n2"]] == pytest.approx((14 + 16 + 9) / 3 + 18)  # w̄(n1) + c(1, 2)
        got = {f"n{k}": priority[graph.index[f"n{k}"]] for k in range(1, 11)}
        assert max(got.values()) == pytest.approx(108.0)
        assert [k for k, v in got.items() if v == pytest.approx(108.0)] == ["n1", "n2", "n9", "n10"]

    def test_critical_path_and_its_processor_are_the_papers(self, paper):
        """n1 -> n2 -> n9 -> n10, on P2 (Fig. 3b): 16 + 19 + 12 + 7 = 54, against 66 on P1 and 68 on P3."""
        graph, _, problem = paper
        w, c = problem.times.mean(axis=1), problem.mean_comm_time()
        path = critical_path(problem, upward_ranks(problem.graph, w, c) + downward_ranks(problem.graph, w, c))
        assert tasks(graph, path) == ["n1", "n2", "n9", "n10"]
        s = cpop(problem)
        assert s.notes["critical_path_device"] == "P2"
        assert {int(s.assignment[i]) for i in path} == {1}

    def test_schedule_length_is_86(self, paper):
        """The paper's CPOP schedule (Fig. 3b) has length 86, against HEFT's 80."""
        _, _, problem = paper
        assert cpop(problem).length == CPOP_MAKESPAN

    def test_registered_placer_reports_its_schedule_and_the_simulator_scores_it(self, paper):
        graph, cluster, _ = paper
        p = registry.place("cpop", graph, cluster)
        assert p.meta["schedule_length"] == CPOP_MAKESPAN
        assert p.meta["critical_path_device"] == "P2"
        assert p.step_time >= CPOP_MAKESPAN
        assert p.step_time == Simulator(graph, cluster).run(p.assignment(graph, cluster)).step_time


def spine_with_branches(length: int = 12, cost: float = 1e-3, side: float = 4e-4, out: float = 1e7,
                        params: float = 0.0) -> OpGraph:
    """A chain (the critical path) with a short side op hanging off every link and rejoining two links on."""
    ops = []
    for k in range(length):
        preds = [f"s{k - 1}"] if k else []
        if k >= 2:
            preds.append(f"b{k - 2}")
        ops.append(Op(f"s{k}", "MatMul", preds, output_bytes=out, param_bytes=params, cost={"gpu": cost}))
        ops.append(Op(f"b{k}", "MatMul", [f"s{k}"], output_bytes=out, cost={"gpu": side}))
    return OpGraph("spine", ops)


def test_the_critical_path_stays_whole_on_one_device():
    """The spine is the critical path, so CPOP never splits it, however busy its device gets."""
    g, c = spine_with_branches(), gpus(3)
    p = registry.place("cpop", g, c)
    assert len({p.devices[f"s{k}"] for k in range(12)}) == 1
    assert p.meta["critical_path_device"] == p.devices["s0"]


def test_a_path_op_without_room_on_the_path_device_goes_elsewhere():
    """Memory first: the spine's weights (12 x 3 GB) overflow one 16 GB device, so it is split, and fits."""
    g = spine_with_branches(params=3e9)
    c = gpus(3, memory=16e9)
    p = registry.place("cpop", g, c)
    assert len({p.devices[f"s{k}"] for k in range(12)}) > 1
    assert not p.oom
