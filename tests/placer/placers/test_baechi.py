"""Baechi's m-TOPO, m-ETF and m-SCT on hand-checked cases."""

import numpy as np
import pytest

from placer.cluster import Cluster, Device, Link
from placer.errors import PlacerError
from placer.graph import Op, OpGraph
from placer.placers import registry
from placer.placers.baechi import favorite_children, list_schedule
from placer.placers.common import LiveMemory, Problem


def cluster(n=2, memory=1e12, bandwidth=1.0, latency=0.0):
    return Cluster("c", [Device(f"G{i}", "gpu", 1e12, 1e12, memory) for i in range(n)],
                   default_link=Link(bandwidth, latency))


def op(name, inputs=(), cost=1.0, out=0.0, params=0.0, **kw):
    return Op(name, "X", list(inputs), output_bytes=out, param_bytes=params, cost={"gpu": cost}, **kw)


class TestMTopo:
    def test_fills_devices_in_topological_order_up_to_an_even_share(self):
        """Six equal ops on two devices: share = 6/2 + 1 = 4 ops' memory, so 4 then 2."""
        g = OpGraph("chain", [op(f"o{k}", [f"o{k - 1}"] if k else [], params=1.0) for k in range(6)])
        p = registry.place("m_topo", g, cluster())
        assert [p.devices[f"o{k}"] for k in range(6)] == ["G0"] * 4 + ["G1"] * 2
        assert p.meta["memory_share"] == 4.0


class TestMEtf:
    def test_fork_runs_in_parallel_when_communication_is_cheap(self):
        """a -> (b, c): b and c start together on two devices."""
        g = OpGraph("fork", [op("a", out=0.1), op("b", ["a"], cost=5), op("c", ["a"], cost=5)])
        problem = Problem.build(g, cluster())
        s = list_schedule(problem, problem.candidates, LiveMemory(problem))
        assert s.length == pytest.approx(6.1)
        assert len(set(s.assignment[1:])) == 2

    def test_fork_stays_together_when_communication_is_dear(self):
        g = OpGraph("fork", [op("a", out=100.0), op("b", ["a"], cost=5), op("c", ["a"], cost=5)])
        problem = Problem.build(g, cluster())
        s = list_schedule(problem, problem.candidates, LiveMemory(problem))
        assert s.length == 11.0 and len(set(s.assignment)) == 1

    def test_ties_go_to_the_larger_static_level(self):
        """Two roots ready at 0 on one device: the one heading the longer path goes first."""
        g = OpGraph("t", [op("short"), op("long"), op("tail", ["long"], cost=3)])
        problem = Problem.build(g, cluster(1))
        s = list_schedule(problem, problem.candidates, LiveMemory(problem))
        assert s.start[g.index["long"]] == 0.0
        # at t=1 "tail" (level 3) and "short" (level 1) can both start: tail first again
        assert s.start[g.index["tail"]] == 1.0 and s.start[g.index["short"]] == 4.0


class TestFavoriteChildren:
    def test_the_child_on_the_critical_path_is_the_favourite(self):
        """a -> b -> d is the long path, a -> c the short one: b is a's favourite child."""
        g = OpGraph("fc", [
            op("a", cost=1, transfer_time=3.0), op("b", ["a"], cost=2), op("c", ["a"], cost=2),
            op("d", ["b"], cost=5),
        ])
        problem = Problem.build(g, cluster())
        fav, info = favorite_children(problem, problem.candidates)
        assert fav[g.index["a"]] == g.index["b"]
        assert fav[g.index["b"]] == g.index["d"]
        assert info["lp_makespan"] == pytest.approx(8.0)
        assert "Optimal" in info["lp_status"]

    def test_each_op_has_at_most_one_favourite_parent(self):
        g = OpGraph("join", [op("a", out=5), op("b", out=5), op("c", ["a", "b"])])
        problem = Problem.build(g, cluster())
        fav, _ = favorite_children(problem, problem.candidates)
        assert (fav == g.index["c"]).sum() <= 1

    def test_m_sct_records_the_lp(self):
        g = OpGraph("chain", [op("a", out=1), op("b", ["a"], out=1), op("c", ["b"])])
        p = registry.place("m_sct", g, cluster())
        assert p.meta["favorite_children"] == 2
        assert p.meta["lp_makespan"] == pytest.approx(3.0)
        assert p.step_time == 3.0


def test_list_schedule_respects_pinned_units():
    """Ops of one colocation unit land together even when a split would be faster."""
    g = OpGraph("pin", [op("a", colocation="v"), op("b"), op("c", ["a", "b"], colocation="v")])
    problem = Problem.build(g, cluster())
    s = list_schedule(problem, problem.candidates, LiveMemory(problem))
    assert s.assignment[g.index["a"]] == s.assignment[g.index["c"]]
    assert np.all(s.finish >= s.start)


@pytest.mark.parametrize("method, option", [("m_etf", {"follow_forward": "false"}), ("m_sct", {"follow_forward": 1}),
                                            ("m_sct", {"lp_time_limit": -1}), ("m_sct", {"lp_time_limit": "60"}),
                                            ("m_etf", {"lp_time_limit": 1.0})])
def test_bad_options_are_refused(method, option):
    """A flag must be a boolean (the string "false" is truthy), a time limit a non-negative number, and an
    option the method does not take is named."""
    from placer.synthetic import layered_graph

    with pytest.raises(PlacerError, match=f"{next(iter(option))}"):
        registry.place(method, layered_graph(50, seed=1), cluster(2), **option)


def test_m_sct_without_lp_time_schedules_as_m_etf():
    """An LP that gets no time yields no favourites; the placement is still made (as m-ETF's)."""
    from placer.synthetic import layered_graph

    g, c = layered_graph(400, seed=3), cluster(2)
    p = registry.place("m_sct", g, c, lp_time_limit=0.0)
    etf = registry.place("m_etf", g, c)
    assert p.meta["favorite_children"] == 0
    assert "scheduled as m-ETF" in p.meta["lp_status"]
    assert p.devices == etf.devices
