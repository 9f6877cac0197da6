"""The `rl` registry method (`placer.rl.method`): trains briefly and returns a scored placement."""

import subprocess
import sys

import pytest

from placer import presets
from placer.errors import PlacerError
from placer.placers import registry
from placer.rl import method  # noqa: F401  (registers method rl)
from placer.synthetic import layered_graph


def test_rl_is_registered_as_learned_not_heuristic():
    assert "rl" in registry.names() and "rl" not in registry.resolve("all")


def test_rl_places_every_op_and_is_scored():
    g = layered_graph(30, seed=2)
    p = registry.place("rl", g, presets.get("2gpu"), budget_seconds=600, steps=2, samples=4, groups=8,
                       warm_start="none")
    assert p.method == "rl" and len(p.devices) == 30
    assert p.step_time >= p.lower_bound and p.meta["steps"] == 2 and p.meta["samples"] == 8


@pytest.mark.parametrize("options, message", [
    ({"budget_seconds": 0}, "budget_seconds must be a positive number"),
    ({"budget_seconds": "soon"}, "budget_seconds must be a positive number"),
    ({"steps": 0}, "steps must be a positive integer"),
    ({"warm_start": "hot"}, "warm_start must be one of"),
    ({"starts": 0}, "starts must be a positive integer"),
    ({"starts": 2.5}, "starts must be a positive integer"),
    ({"starts": 9}, "starts must be an integer from 1 to 8"),
    ({"seed": -1}, "seed must be a non-negative integer"),
    ({"starts": 2, "warm_start": "none"}, "starts races heuristic warm starts; it does not go with warm_start 'none'"),
    ({"starts": 2, "policy": "shipped"}, "starts races heuristic warm starts; it does not go with policy"),
    ({"policy": "shipped", "best_of": 2000}, "best_of must be an integer from 0 to 1024, got 2000"),
    ({"policy": "shipped", "best_of": -1}, "best_of must be an integer"),
    ({"policy": "none", "best_of": 4, "steps": 1}, "best_of samples the pre-trained policy's answer, and this run "
                                                   "trains from scratch"),
])
def test_bad_options_are_refused(options, message):
    with pytest.raises(PlacerError, match=message):
        registry.place("rl", layered_graph(10), presets.get("2gpu"), **options)


def test_best_of_chooses_a_fine_tunes_start():
    """With a budget, best_of is the K of the zero-shot start the fine-tune begins from, not dropped."""
    p = registry.place("rl", layered_graph(30, seed=2), presets.get("2gpu"), policy="shipped", budget_seconds=600,
                       steps=1, best_of=3)
    assert p.meta["warm_start"]["samples"] <= 3  # the chosen pool member's share of K (the default gives more)


def test_starts_races_heuristic_warm_starts():
    """starts=3 trains from three different heuristics and returns the fastest placement any of them found."""
    g = layered_graph(40, seed=1)
    p = registry.place("rl", g, presets.get("4gpu"), budget_seconds=600, steps=12, samples=4, groups=8, starts=3)
    race = p.meta["race"]
    assert len(race["starts"]) == 3 and len({s["heuristic"] for s in race["starts"]}) == 3
    assert sum(s["steps"] for s in race["starts"]) == 12
    assert p.step_time == pytest.approx(min(s["best_step_time"] for s in race["starts"]))
    assert len(p.devices) == 40 and p.method == "rl"


def test_zero_shot_placement_does_not_import_tensorflow():
    """A pre-trained policy places in NumPy: `placer place --method rl --policy shipped` must not pay the
    seconds TensorFlow takes to import."""
    code = ("import sys; from placer import presets; from placer.placers import registry; import placer.rl; "
            "from placer.synthetic import layered_graph; "
            "p = registry.place('rl', layered_graph(60, seed=3), presets.get('4gpu'), policy='shipped', best_of=8); "
            "print(len(p.devices), 'tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["60", "False"]
