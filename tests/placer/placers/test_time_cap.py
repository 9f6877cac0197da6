"""The list schedulers' time cap: past it, the ops left take the quick rule, and the placement is whole."""

from dataclasses import replace

import numpy as np
import pytest

from placer import presets
from placer.graph import Op, OpGraph
from placer.placers import registry
from placer.placers.baechi import list_schedule
from placer.placers.common import LiveMemory, Problem
from placer.placers.cpop import cpop
from placer.placers.heft import heft
from placer.placers.time_cap import TIME_LIMIT_SECONDS, Deadline, place_rest
from placer.synthetic import layered_graph

CAPPED = ["heft", "cpop", "m_etf", "m_sct"]


class AfterChecks(Deadline):
    """A deadline that passes at its `k`-th check: the cap hits mid-schedule on any machine."""

    def __init__(self, k: int):
        super().__init__(TIME_LIMIT_SECONDS)
        self.checks, self.k = 0, k

    def passed(self) -> bool:
        self.checks += 1
        return self.checks > self.k


def colocated_graph() -> OpGraph:
    """A layered graph whose ops ``o0``, ``o5``, ``o10`` ... share colocation keys in groups of three."""
    g = layered_graph(240, seed=5)
    return OpGraph("colocated", [replace(o, colocation=f"v{k // 15}" if k % 5 == 0 else None)
                                 for k, o in enumerate(g)])


@pytest.mark.parametrize("method", CAPPED)
def test_a_zero_cap_places_every_op_and_says_so(method):
    """With no time at all the quick rule places the whole graph: a valid placement, colocations kept."""
    g, c = colocated_graph(), presets.get("8gpu")
    p = registry.place(method, g, c, time_limit=0.0)
    assert set(p.devices) == {op.name for op in g} and set(p.devices.values()) <= {d.name for d in c.devices}
    assert p.meta["time_capped"] is True and p.meta["time_limit"] == 0.0
    assert p.meta["capped_ops"] == len(g)
    assert "schedule_length" not in p.meta
    for key in {op.colocation for op in g} - {None}:
        assert len({p.devices[op.name] for op in g if op.colocation == key}) == 1
    assert p.step_time > 0


@pytest.mark.parametrize("method", CAPPED)
def test_uncapped_placements_say_nothing(method):
    """Under the cap nothing changes: no cap facts in meta, the scheduler's own makespan reported."""
    p = registry.place(method, layered_graph(120, seed=2), presets.get("4gpu"))
    assert "time_capped" not in p.meta and p.meta["schedule_length"] > 0


@pytest.mark.parametrize("schedule", ["heft", "cpop", "m_etf"])
def test_a_cap_mid_schedule_keeps_the_ops_already_scheduled(schedule):
    """Ops scheduled before the cap keep their device and times; the rest get a device and no times."""
    g, c = colocated_graph(), presets.get("8gpu")
    problem = Problem.build(g, c, fuse_chains=schedule == "m_etf")
    run = {"heft": lambda d: heft(problem, memory=LiveMemory(problem), deadline=d),
           "cpop": lambda d: cpop(problem, memory=LiveMemory(problem), deadline=d),
           "m_etf": lambda d: list_schedule(problem, problem.candidates, LiveMemory(problem), deadline=d)}[schedule]
    full, part = run(None), run(AfterChecks(100))
    done = ~np.isnan(part.finish)
    assert done.sum() == 100 and part.capped_ops == len(g) - 100
    assert np.array_equal(part.assignment[done], full.assignment[done])
    assert np.array_equal(part.finish[done], full.finish[done])
    assert np.all(part.assignment >= 0) and np.all(np.isnan(part.start[~done]))
    assert part.notes["capped_ops"] == len(g) - 100 and "schedule_length" not in part.meta()


def test_the_quick_rule_follows_the_first_input_with_room():
    """a on the second GPU; b (input a) follows it; x (no input) goes to the first GPU, which has more room;
    c (inputs b and x) follows x, its first input in graph order."""
    g = OpGraph("q", [Op(n, "X", ins, output_bytes=1.0, cost={"gpu": 1.0})
                      for n, ins in [("a", []), ("x", []), ("b", ["a"]), ("c", ["b", "x"])]])
    c = presets.get("2gpu")
    problem = Problem.build(g, c)
    memory = LiveMemory(problem)
    assignment = np.full(problem.num_ops, -1, dtype=np.int64)
    pinned = np.full(problem.num_units, -1, dtype=np.int64)
    gpus = problem.candidates
    a = g.index["a"]
    assignment[a] = pinned[problem.unit[a]] = gpus[1]
    memory.place(a, int(gpus[1]), int(problem.unit[a]), assignment)
    assert place_rest(problem, memory, assignment, pinned, gpus) == 3
    assert assignment[g.index["b"]] == gpus[1]
    assert assignment[g.index["x"]] == assignment[g.index["c"]] == gpus[0]


@pytest.mark.parametrize("value", [-1, "60", float("inf")])
def test_a_bad_time_limit_is_refused(value):
    from placer.errors import PlacerError

    with pytest.raises(PlacerError, match="time_limit"):
        registry.place("heft", layered_graph(50, seed=1), presets.get("2gpu"), time_limit=value)
