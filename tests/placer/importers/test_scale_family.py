"""The scale family (graphs/make_scale.py) at toy sizes: GPT-style training steps, imported, placeable."""

from __future__ import annotations

import numpy as np
import pytest

from graphs import make_scale
from placer import presets
from placer.graph_io import load_graph
from placer.placers import registry
from placer.simulator import Simulator


@pytest.fixture(scope="module")
def steps():
    """The tests' small member at one and two layers, built once."""
    return {k: make_scale.build(f"tiny{k}", make_scale.TINY._replace(layers=k)) for k in (1, 2)}


def test_a_training_step_of_the_decoder(steps):
    """Forward, loss, gradients and Adam updates of every block, with the sizes recorded."""
    g = steps[2]
    names = [op.name for op in g]
    assert any(n.startswith("gradient_tape/") for n in names)
    assert sum(op.op == "MatMul" or op.op == "BatchMatMulV2" or op.op == "Einsum" for op in g) > 0
    assert any("block_1_attention" in n for n in names) and not any("block_2_" in n for n in names)
    assert g.meta["training"] is True and g.meta["layers"] == 2 and g.meta["family"] == "scale"
    assert g.meta["import_seconds"] >= 0 and g.meta["build_seconds"] >= 0


def test_depth_sets_the_op_count(steps):
    """Each block adds the same ops, so depth reaches any op count: the family's ~9k to ~94k."""
    per_block = len(steps[2]) - len(steps[1])
    assert 500 < per_block < 1000
    assert len(steps[1]) - per_block > 0  # embeddings, loss, softmax: the rest of the step


@pytest.mark.parametrize("cluster", ["8gpu", "2x-dgx-a100"])
def test_placed_and_simulated(steps, cluster):
    """A heuristic places the step on either cluster, and the simulator scores it."""
    g, c = steps[2], presets.get(cluster)
    p = registry.place("m_topo", g, c)
    assert p.step_time > 0 and set(p.devices) == {op.name for op in g}
    res = Simulator(g, c).run(p.assignment(g, c))
    assert res.step_time == pytest.approx(p.step_time)


def test_script_writes_and_skips(tmp_path, capsys):
    """`python -m graphs.make_scale tiny --out DIR` writes a loadable graph and skips it when run again."""
    assert make_scale.main(["tiny", "--out", str(tmp_path)]) == 0
    g = load_graph(tmp_path / "tiny.json.gz")
    assert len(g) == g.meta["op_count"] and np.isfinite(g.meta["total_flops"])
    assert make_scale.main(["tiny", "--out", str(tmp_path)]) == 0
    assert "exists, skipped" in capsys.readouterr().out


def test_unknown_member_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        make_scale.main(["gpt7"])
    assert e.value.code == 2 and "unknown member(s) gpt7" in capsys.readouterr().err


@pytest.mark.parametrize("method", ["heft", "cpop", "m_etf", "m_sct"])
def test_a_capped_list_scheduler_still_places_the_step(steps, method):
    """With no time (time_limit 0) the time cap's quick rule places every op of the step, and says so."""
    g, c = steps[2], presets.get("8gpu")
    p = registry.place(method, g, c, time_limit=0.0)
    assert set(p.devices) == {op.name for op in g}
    assert p.meta["time_capped"] is True and p.meta["capped_ops"] == len(g)
    res = Simulator(g, c).run(p.assignment(g, c))
    assert res.step_time == pytest.approx(p.step_time)
