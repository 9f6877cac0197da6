"""The zero-shot sampling temperature: what it does to samples, and how it is chosen on validation graphs."""

import json
import shutil
from dataclasses import replace

import numpy as np
import pytest

from placer import presets
from placer.errors import PlacerError
from placer.rl import pretrain, sampling
from placer.rl.numpy_policy import decode
from placer.rl.saved_policy import SHIPPED_POLICY_DIR, load_policy
from placer.rl.zero_shot import candidate_placements, place_zero_shot
from placer.synthetic import layered_graph


@pytest.fixture(scope="module")
def shipped():
    return load_policy()


@pytest.fixture(scope="module")
def envs(shipped):
    return [pretrain.make_environment(layered_graph(n, seed=n), presets.get(c), shipped.groups, ("single", "metis"),
                                      kind_groups=shipped.kind_groups, balanced_groups=shipped.balanced_groups,
                                      critical_groups=shipped.critical_groups)
            for n in (150, 300) for c in ("2gpu", "4gpu")]


def test_temperature_spreads_samples_but_keeps_the_greedy_placement(shipped, envs):
    env = envs[-1]
    w, g, d, c = shipped.weights, env.group_feats, env.device_feats, env.context
    greedy = [decode(w, g, d, 1, greedy=True, temperature=t, context=c)[0] for t in (1.0, 4.0)]
    np.testing.assert_array_equal(greedy[0], greedy[1])
    moved = {}
    for t in (1.0, 4.0):
        acts, logp = decode(w, g, d, 64, greedy=False, rng=np.random.default_rng(0), temperature=t, context=c)
        _, rescored = decode(w, g, d, 64, actions=acts, temperature=t, context=c)
        np.testing.assert_allclose(logp, rescored, rtol=1e-5)  # log-probabilities of the tempered softmax
        moved[t] = float((acts != greedy[0]).mean())  # share of groups placed off the greedy device
    assert moved[4.0] > moved[1.0]


def test_the_chosen_temperature_is_the_fastest_of_the_sweep(shipped, envs):
    heard = []
    chosen = sampling.choose_temperature(shipped, envs, samples=16, temperatures=(4.0, 1.0, 2.0), seed=3,
                                         on_temperature=lambda t, r: heard.append((t, r)))
    sweep = chosen["geomean_ratio_to_teacher"]
    assert heard == [(t, sweep[f"{t:g}"]) for t in (1.0, 2.0, 4.0)]  # progress, in the order measured
    assert list(sweep) == ["1", "2", "4"] and all(np.isfinite(r) and r > 0 for r in sweep.values())
    assert sweep[f"{chosen['temperature']:g}"] == min(sweep.values())
    assert chosen["chosen_on"] == sorted(e.key for e in envs) and chosen["samples"] == 16 and chosen["seed"] == 3
    # the sweep is what best-of-K measures: recompute one point
    tempered = sampling.at_temperature(shipped, 2.0)
    ratios = [sampling.best_of_ratio(tempered, e, 16, 3) for e in envs]
    assert sweep["2"] == pytest.approx(float(np.exp(np.mean(np.log(ratios)))))


def test_ties_go_to_the_lower_temperature(shipped, envs, monkeypatch):
    monkeypatch.setattr(sampling, "best_of_ratio", lambda *a: 0.9)
    assert sampling.choose_temperature(shipped, envs, temperatures=(4.0, 1.5, 2.0))["temperature"] == 1.5


def test_bad_requests_are_refused(shipped, envs):
    with pytest.raises(PlacerError, match="validation graphs"):
        sampling.choose_temperature(shipped, [])
    with pytest.raises(PlacerError, match="positive"):
        sampling.choose_temperature(shipped, envs, temperatures=(1.0, 0.0))


def test_zero_shot_samples_at_the_cards_temperature(shipped, envs):
    graph, cluster = layered_graph(300, seed=7), presets.get("4gpu")
    alone = replace(shipped, pooled=())  # the pooled policy draws at its own card's temperature
    for t in (1.0, 6.0):
        p = place_zero_shot(graph, cluster, sampling.at_temperature(alone, t), samples=32, seed=1)
        assert f"temperature {t:g}" in p.meta["decoding"] and p.meta["policy"]["sampling_temperature"] == t
    env = envs[-1]
    cold, hot = (candidate_placements(sampling.at_temperature(shipped, t), env.group_feats, env.device_feats, 32, 1,
                                      env.context) for t in (1.0, 6.0))
    np.testing.assert_array_equal(cold[0], hot[0])  # the greedy candidate
    assert not np.array_equal(cold[1:], hot[1:])


@pytest.mark.parametrize("bad", [-1.0, 0, "hot", float("inf")])
def test_a_card_with_a_bad_temperature_is_refused(tmp_path, bad):
    folder = tmp_path / "policy"
    shutil.copytree(SHIPPED_POLICY_DIR, folder)
    card = json.loads((folder / "policy.json").read_text())
    card["sampling"] = {"temperature": bad}
    (folder / "policy.json").write_text(json.dumps(card))
    with pytest.raises(PlacerError, match="sampling.temperature"):
        load_policy(folder)


@pytest.mark.parametrize("member", [0, 1], ids=["v5", "critical"])
def test_the_shipped_policy_says_where_its_temperature_came_from(shipped, member):
    policy = shipped.members[member]
    s = policy.card["sampling"]
    assert policy.sampling_temperature == s["temperature"] in sampling.TEMPERATURES
    assert s["geomean_ratio_to_teacher"][f"{s['temperature']:g}"] == min(s["geomean_ratio_to_teacher"].values())
    trained = set(policy.card["trained_on"]["graphs"])
    assert s["chosen_on"] and not trained & {k.split("@")[0] for k in s["chosen_on"]}
