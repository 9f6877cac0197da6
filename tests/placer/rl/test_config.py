"""`placer.rl.config`: one rule per field for training and pre-training, and the defaults each keeps."""

import dataclasses

import pytest

from placer.errors import PlacerError
from placer.rl.config import SEED_LIMIT, PretrainConfig, RLConfig, TrainConfig, default_of, rule_of


def test_the_two_runs_keep_their_own_defaults():
    """Pre-training's six own defaults; the other shared fields are the same for both."""
    train, pre = TrainConfig(), PretrainConfig()
    own = {"samples": (32, 16), "groups": (256, 128), "kind_groups": (True, False),
           "balanced_groups": (True, False), "learning_rate": (2e-3, 1e-3), "entropy_weight": (0.01, 0.005)}
    for f in dataclasses.fields(RLConfig):
        expected = own.get(f.name, (getattr(train, f.name),) * 2)
        assert (getattr(train, f.name), getattr(pre, f.name)) == expected, f.name
    assert (train.hidden, train.baseline_decay, train.clip_norm, train.oom_penalty, train.seed) == (64, 0.9, 1.0,
                                                                                                   1.0, 0)


def test_a_redeclared_default_keeps_the_shared_rule():
    assert rule_of(PretrainConfig, "samples") is rule_of(TrainConfig, "samples")
    assert default_of(PretrainConfig, "teachers") == ("single", "expert", "metis", "heft", "m_topo")


@pytest.mark.parametrize("config", [TrainConfig, PretrainConfig])
@pytest.mark.parametrize("field, value, message", [
    ("entropy_weight", -0.1, "entropy_weight must be a non-negative number, got -0.1"),
    ("baseline_decay", 1.0, r"baseline_decay must be in \[0, 1\), got 1.0"),
    ("oom_penalty", float("nan"), "oom_penalty must be a non-negative number, got nan"),
    ("seed", SEED_LIMIT, r"seed must be an integer in \[0, 2\*\*31\), got 2147483648"),
    ("seed", True, "seed must be an integer"),
    ("hidden", 0, "hidden must be a positive integer, got 0"),
    ("samples", 1, r"samples must be an integer of at least 2 \(the advantage compares samples\), got 1"),
    ("load_aware", "yes", "load_aware must be true or false, got 'yes'"),
])
def test_both_runs_check_every_shared_field(config, field, value, message):
    """Pre-training skipped entropy_weight, baseline_decay, oom_penalty and seed."""
    with pytest.raises(PlacerError, match=message):
        config(**{field: value}).check()


def test_the_defaults_pass_their_rules():
    assert TrainConfig().check() == TrainConfig()
    assert PretrainConfig().check() == PretrainConfig()


def test_command_line_help_says_the_configs_defaults():
    from placer.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command" or getattr(a, "choices", None))
    train = sub.choices["train"].format_help().replace("\n", " ")
    pretrain = sub.choices["pretrain"].format_help().replace("\n", " ")
    assert f"(default {TrainConfig.samples})" in " ".join(train.split())
    assert f"(default {PretrainConfig.samples})" in " ".join(pretrain.split())
