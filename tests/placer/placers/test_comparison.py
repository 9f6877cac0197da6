"""`placer.placers.comparison.compare`: the rows of `placer compare`, and resuming them."""

from typing import Annotated

import pytest

from placer.placers import registry
from placer.placers.options import Option
from placer.errors import PlacerError
from placer.placers.comparison import compare, resolve_methods, winners
from placer.placers.single import place_single
from placer.presets import get as preset
from placer.synthetic import layered_graph


@pytest.fixture
def optioned_method():
    """A method taking an option (as rl takes budget_seconds or policy); it places as `single` does."""
    calls = []

    @registry.register("test_optioned", description="takes an option", heuristic=False)
    def optioned(graph, cluster, *, budget_seconds: Annotated[float | None, Option("a budget", gt=0)] = None,
                 policy: Annotated[str | None, Option("a policy")] = None):
        calls.append({k: v for k, v in (("budget_seconds", budget_seconds), ("policy", policy)) if v is not None})
        return place_single(graph, cluster)

    yield "test_optioned", calls
    registry._REGISTRY.pop("test_optioned")


def test_resume_reuses_a_row_made_with_the_same_method_options(optioned_method):
    name, calls = optioned_method
    graph, cluster = layered_graph(40, seed=0), preset("2gpu")
    (row,) = compare([graph], [cluster], [name], method_options={name: {"budget_seconds": 5.0}})
    assert row["method_options"] == {"budget_seconds": 5.0}
    reuse = {(row["graph"], row["cluster"], name): row}
    (again,) = compare([graph], [cluster], [name], reuse=reuse, method_options={name: {"budget_seconds": 5.0}})
    assert again is row and len(calls) == 1


@pytest.mark.parametrize("options", [{}, {"budget_seconds": 60.0}, {"policy": "shipped"}])
def test_resume_places_again_a_row_made_with_other_method_options(optioned_method, options):
    """A resumed `compare --methods rl --rl-policy shipped` must not answer with a row trained for 5 s."""
    name, calls = optioned_method
    graph, cluster = layered_graph(40, seed=0), preset("2gpu")
    (row,) = compare([graph], [cluster], [name], method_options={name: {"budget_seconds": 5.0}})
    reuse = {(row["graph"], row["cluster"], name): row}
    (again,) = compare([graph], [cluster], [name], reuse=reuse, method_options={name: options})
    assert again is not row and calls == [{"budget_seconds": 5.0}, options]
    assert again.get("method_options", {}) == options


def test_best_row_is_the_winner_of_the_heuristic_rows_and_names_it():
    """``all,best``: best chooses among the rows already made (taken as they are), by the one rule."""
    graph, cluster = layered_graph(60, seed=4), preset("4gpu")
    methods = resolve_methods("all,best")
    assert methods == [*registry.names(heuristic_only=True), "best"]
    rows = compare([graph], [cluster], methods)
    *heuristics, best_row = rows
    chosen = next(r for r in heuristics if r["method"] == best_row["chosen"])
    assert best_row["method"] == "best" and best_row["step_time"] == chosen["step_time"]
    assert winners(rows)[(graph.name, cluster.name)] == best_row["chosen"]


def test_best_alone_places_its_candidates():
    graph, cluster = layered_graph(40, seed=5), preset("2gpu")
    (row,) = compare([graph], [cluster], resolve_methods("best"))
    assert row["chosen"] in registry.names(heuristic_only=True) and row["step_time"] > 0


def test_resolve_methods_checks_every_other_name():
    with pytest.raises(PlacerError, match="unknown method 'nope'"):
        resolve_methods("best,nope")
