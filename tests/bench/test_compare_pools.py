"""`bench/compare_pools.py`: a policy against itself is 1.0 everywhere, and bad input is one line."""

import json
import sys

import pytest

from bench import compare_pools
from placer.errors import PlacerError
from placer.rl.saved_policy import SHIPPED_POLICY_DIR
from placer.synthetic import layered_graph


@pytest.fixture
def corpus(one_graph_corpus, monkeypatch):
    """A one-graph corpus whose graph is a 40-op layered graph; returns its folder."""
    monkeypatch.setattr(compare_pools, "load_graph", lambda path: layered_graph(40, seed=0))
    return one_graph_corpus


def _run(monkeypatch, *argv):
    monkeypatch.setattr(sys, "argv", ["compare_pools.py", *argv])
    return compare_pools.main()


def test_the_shipped_policy_against_itself_is_even_in_every_world(corpus, monkeypatch, tmp_path, capsys):
    out = tmp_path / "pools.json"
    assert _run(monkeypatch, "shipped", "shipped", "--corpus", str(corpus), "--cluster", "2gpu", "4gpu",
                "--seeds", "0", "1", "--worlds", "1", "--out", str(out)) == 0
    written = json.loads(out.read_text())
    assert len(written["rows"]) == 4
    assert all(r["ratio"] == 1.0 for r in written["rows"])
    assert [r["cluster"] for r in written["rows"] if "worlds_worst" in r] == ["2gpu", "4gpu"]
    assert written["summary"]["pairs"] == 2
    assert written["summary"]["geomean"] == written["summary"]["worlds_worst_geomean"] == 1.0
    assert "B/A over 2 pairs x 2 seeds: geomean 1.0000" in capsys.readouterr().out


def test_as_main_pools_the_candidate_in_the_main_members_place(corpus, monkeypatch, tmp_path):
    """--as-main: the shipped pool with another main member (here its critical member's), the shipped folder
    untouched."""
    shipped = {p: p.read_bytes() for p in SHIPPED_POLICY_DIR.rglob("*") if p.is_file()}
    loaded = []
    real_load = compare_pools.load_policy
    monkeypatch.setattr(compare_pools, "load_policy", lambda folder: loaded.append(real_load(folder)) or loaded[-1])
    out = tmp_path / "pools.json"
    assert _run(monkeypatch, "shipped", str(SHIPPED_POLICY_DIR / "critical"), "--as-main", "--corpus", str(corpus),
                "--cluster", "4gpu", "--seeds", "0", "--worlds", "0", "--out", str(out)) == 0
    a, b = loaded
    assert b.card["name"] == a.card["name"] and b.card["pool"] == a.card["pool"]
    assert b.critical_groups and not a.critical_groups
    assert len(b.members) == len(a.members)
    assert len(json.loads(out.read_text())["rows"]) == 1
    assert {p: p.read_bytes() for p in SHIPPED_POLICY_DIR.rglob("*") if p.is_file()} == shipped


def test_an_answer_that_does_not_fit_never_counts_as_fast():
    class Answer:
        oom, step_time = True, 0.001

    inf = compare_pools.step_of(Answer())
    assert inf == float("inf")
    assert list(compare_pools.ratios([inf, 0.002, inf], [0.001, inf, inf])) == [inf, 0.0, 1.0]


def test_bad_worlds_are_refused_before_any_placing(corpus, monkeypatch):
    with pytest.raises(PlacerError, match="--worlds must be from 0 to"):
        _run(monkeypatch, "shipped", "shipped", "--corpus", str(corpus), "--worlds", "-1")


def test_a_graph_not_in_the_corpus_is_named(corpus, monkeypatch):
    with pytest.raises(PlacerError, match=r"--graphs: not in the corpus: \['nope'\]"):
        _run(monkeypatch, "shipped", "shipped", "--corpus", str(corpus), "--graphs", "nope")
