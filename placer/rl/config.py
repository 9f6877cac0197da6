"""The settings of a training run and of a pre-training run: each field, its default and its rule, once.

`RLConfig` holds what both share (the policy's sizes, the grouping, the
REINFORCE hyperparameters, the seed); `TrainConfig` adds what only
``placer train`` has (warm start, objective, replay, XLA) and
`PretrainConfig` what only ``placer pretrain`` has (imitation phase,
teachers, export rule). Pre-training keeps six defaults of its own, each
redeclared in `PretrainConfig` with why: fewer samples and groups per step,
heavy-edge groups, a smaller learning rate and entropy bonus.

Every field carries its `Rule` (what values a run can use) in its metadata;
`RLConfig.check` applies them all, then the cross-field checks a subclass
adds. The command line (``placer train``, ``placer pretrain``), the
service's ``TrainOptions`` and the benchmarks read defaults and rules from
here (`default_of`, `rule_of`), so none is written twice.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from placer.errors import PlacerError

WARM_STARTS = ("heuristic", "none")
"""``TrainConfig.warm_start``: imitate the best heuristic first, or the paper's cold start."""
EXPORT_RULES = ("validation", "last")
"""``PretrainConfig.export``: which checkpoint ``DIR/policy`` holds."""
XLA_MIN_BUDGET_SECONDS = 600.0
"""A time budget under this trains without XLA: XLA compiles the update and the sampling pass at their
first calls, tens of seconds on a small machine, which a short budget cannot win back while plain graph
mode steps about as fast (measured in docs/service-security.md)."""
SEED_LIMIT = 2**31
"""Seeds are in ``[0, SEED_LIMIT)``: TensorFlow's stateless ops take them as int32."""
MAX_STARTS = 8
"""The most heuristic warm starts a race takes (`placer.rl.race`); each start's trainer holds its own policy."""


@dataclass(frozen=True)
class Rule:
    """The values one setting may take; `check` raises a `PlacerError` naming the setting otherwise.

    kind : ``"integer"``, ``"number"`` (finite int or float), ``"seconds"`` (a number of seconds),
        ``"fraction"``, ``"choice"``, ``"objective"`` (one of `placer.objectives.OBJECTIVES`),
        ``"heuristics"`` (names of registered heuristic placers, at least one), ``"flag"`` (bool) or
        ``"flag_or_auto"`` (bool or None).
    least : the smallest value allowed (integers, numbers, seconds).
    positive : numbers only: the value must exceed `least` (0) rather than reach it.
    below : the value must be under this (integers, fractions: then ``[least, below)``).
    choices : ``"choice"`` only: the allowed values.
    why : said after the bound, when the bound has a reason.
    """

    kind: str
    least: float | None = None
    positive: bool = False
    below: float | None = None
    choices: tuple[Any, ...] = ()
    why: str = ""

    def check(self, name: str, value: Any) -> None:
        """Raise PlacerError unless `value` is allowed for the setting `name`."""
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if self.kind == "integer":
            integer = isinstance(value, int) and not isinstance(value, bool)
            if self.below is not None:
                if not (integer and self.least <= value < self.below):
                    raise PlacerError(f"{name} must be an integer in [{self.least:g}, {self._below_text()}), "
                                      f"got {value!r}")
            elif self.least == 1 and not (integer and value >= 1):
                raise PlacerError(f"{name} must be a positive integer, got {value!r}")
            elif not (integer and value >= self.least):
                raise PlacerError(f"{name} must be an integer of at least {self.least:g}"
                                  f"{f' ({self.why})' if self.why else ''}, got {value!r}")
        elif self.kind == "number":
            ok = number and math.isfinite(value) and (value > self.least if self.positive else value >= self.least)
            if not ok:
                raise PlacerError(f"{name} must be a {'positive' if self.positive else 'non-negative'} number, "
                                  f"got {value!r}")
        elif self.kind == "seconds":
            if not (number and math.isfinite(value) and value >= 0):
                raise PlacerError(f"{name} must be a non-negative number of seconds, got {value!r}")
        elif self.kind == "fraction":
            upper = value < self.below if self.below is not None else value <= 1
            if not (number and 0 <= value and upper):
                raise PlacerError(f"{name} must be in [0, {'1)' if self.below is not None else '1]'}, got {value!r}")
        elif self.kind == "choice":
            if value not in self.choices:
                raise PlacerError(f"{name} must be one of {', '.join(map(str, self.choices))}, got {value!r}")
        elif self.kind == "flag":
            if not isinstance(value, bool):
                raise PlacerError(f"{name} must be true or false, got {value!r}")
        elif self.kind == "objective":
            from placer.objectives import OBJECTIVES

            if value not in OBJECTIVES:
                raise PlacerError(f"{name} must be one of {', '.join(OBJECTIVES)}, got {value!r}")
        elif self.kind == "heuristics":
            from placer.placers import registry

            heuristics = registry.names(heuristic_only=True)
            if not value or any(t not in heuristics for t in value):
                raise PlacerError(f"{name} must be heuristic placers ({', '.join(heuristics)}); got {list(value)!r}")
        elif self.kind == "flag_or_auto":
            if value is not None and not isinstance(value, bool):
                raise PlacerError(f"{name} must be true, false or None (automatic), got {value!r}")
        else:
            raise ValueError(f"unknown rule kind {self.kind!r}")

    def _below_text(self) -> str:
        return "2**31" if self.below == SEED_LIMIT else f"{self.below:g}"


def setting(default: Any, rule: Rule) -> Any:
    """A config field: its default and its rule (kept in the field's metadata)."""
    return field(default=default, metadata={"rule": rule})


def redefault(base: type, name: str, default: Any) -> Any:
    """A subclass's field `name` with another default, keeping `base`'s rule."""
    return field(default=default, metadata=base.__dataclass_fields__[name].metadata)


def rule_of(config: type | Any, name: str) -> Rule:
    """The rule of field `name` of a config class (or instance)."""
    return config.__dataclass_fields__[name].metadata["rule"]


def default_of(config: type | Any, name: str) -> Any:
    """The default of field `name` of a config class (what a run that does not set it gets)."""
    f = config.__dataclass_fields__[name]
    return f.default_factory() if f.default is MISSING else f.default


def on_off(value: bool) -> str:
    """A flag's default as help texts say it."""
    return "on" if value else "off"


POSITIVE_INTEGER = Rule("integer", least=1)
POSITIVE_NUMBER = Rule("number", least=0, positive=True)
NON_NEGATIVE_NUMBER = Rule("number", least=0)
FLAG = Rule("flag")


@dataclass
class RLConfig:
    """What training and pre-training share: the policy's sizes, the grouping, REINFORCE, the seed.

    Defaults here are ``placer train``'s; `PretrainConfig` redeclares the six it sets otherwise.
    """

    samples: int = setting(32, Rule("integer", least=2, why="the advantage compares samples"))
    """K: placements sampled and simulated per REINFORCE step."""
    groups: int = setting(256, POSITIVE_INTEGER)
    """G: the most groups a graph's ops are coarsened into (`group_graph`'s own default, 256, is a placer's)."""
    hidden: int = setting(64, POSITIVE_INTEGER)
    """LSTM units (encoder per direction, decoder) and attention width."""
    load_aware: bool = setting(False, FLAG)
    """The decoder also reads the devices' load so far (`placer.rl.policy.PolicyConfig.load_aware`)."""
    kind_groups: bool = setting(True, FLAG)
    """Ops that run fastest on different kinds of device are grouped apart (`group_graph`'s ``split_kinds``)."""
    balanced_groups: bool = setting(True, FLAG)
    """Small neighbouring groups merge before any group exceeds its compute share (`group_graph`'s ``balanced``)."""
    critical_groups: bool = setting(False, FLAG)
    """Ops on a critical path are grouped apart from the rest (`group_graph`'s ``split_critical``)."""
    learning_rate: float = setting(2e-3, POSITIVE_NUMBER)
    """Adam's step size in REINFORCE."""
    entropy_weight: float = setting(0.01, NON_NEGATIVE_NUMBER)
    """Weight of the entropy bonus in the loss (keeps the policy exploring)."""
    baseline_decay: float = setting(0.9, Rule("fraction", below=1))
    """EMA decay of the reward baseline (`placer.rl.reinforce.next_baseline`)."""
    clip_norm: float = setting(1.0, POSITIVE_NUMBER)
    """Global gradient-norm clip."""
    oom_penalty: float = setting(1.0, NON_NEGATIVE_NUMBER)
    """Reward subtracted from an out-of-memory placement, times (1 + its worst overflow)."""
    seed: int = setting(0, Rule("integer", least=0, below=SEED_LIMIT))
    """Seeds the weights and every sample."""
    world_sigma: float = setting(0.0, Rule("number", least=0))
    """Robust training: each REINFORCE step's reward is half the nominal world's, half that of one world drawn
    around it (`placer.rl.worlds`: op costs, bandwidths, latencies and GPU speed times lognormal factors of this
    sigma), so that the policy learns placements that stay fast when the model's numbers are off; the best
    placement is still judged in the nominal world. 0: the nominal world alone."""

    def check(self):
        """Raise PlacerError on the first value no run can use, naming the field; returns the config."""
        for f in fields(self):
            f.metadata["rule"].check(f.name, getattr(self, f.name))
        self._check_together()
        return self

    def _check_together(self) -> None:
        """Rules between fields (a subclass's); each field alone has passed its own rule."""


@dataclass
class TrainConfig(RLConfig):
    """Hyperparameters of one ``placer train`` run (saved with its checkpoints).

    `kind_groups` and `balanced_groups` are on, since 10-minute RL on both beat heavy-edge groups alone;
    runs saved before then resume as they were (`placer.rl.trainer.config_from_saved`). A fine-tune
    takes the sizes and grouping from its policy (`placer.rl.finetune.fine_tune_config`).
    """

    replay_best: bool = setting(True, FLAG)
    """Put the best placement so far among each step's samples (self-imitation); False: plain REINFORCE."""
    warm_start: str = setting("heuristic", Rule("choice", choices=WARM_STARTS))
    """'heuristic': imitate the best heuristic first; 'none': the paper's cold start."""
    warm_start_search: float = setting(0.0, Rule("seconds", least=0))
    """Seconds of local search (`placer.placers.refine`) improving the warm start's heuristic first (0: none)."""
    imitation_steps: int = setting(200, POSITIVE_INTEGER)
    """Most supervised steps of the warm start."""
    imitation_fraction: float = setting(0.15, Rule("fraction"))
    """Most of the time budget the warm start's imitation may take (its heuristics and grouping not counted),
    so that a short job keeps most of its budget for REINFORCE."""
    entropy_floor: float = setting(0.05, Rule("fraction"))
    """Per-group entropy below which the entropy bonus grows, as a fraction of a uniform choice's (ln of the
    device count; `placer.rl.reinforce.next_entropy_scale`; 0: a fixed bonus)."""
    objective: str = setting("step_time", Rule("objective"))
    """What the reward measures: 'step_time' (the simulator's step) or 'throughput' (the pipelined max load)."""
    jit: bool | None = setting(None, Rule("flag_or_auto"))
    """Compile the passes with XLA; False: plain graph mode; None: XLA from `trainer.JIT_MIN_GROUPS` groups on."""

    def _check_together(self) -> None:
        if self.world_sigma > 0 and self.objective != "step_time":
            raise PlacerError(f"world_sigma draws worlds of step times; this run's objective is {self.objective!r}")
        if self.warm_start_search > 0 and (self.warm_start != "heuristic" or self.objective != "step_time"):
            raise PlacerError("warm_start_search improves a heuristic warm start's step time; this run has "
                              f"warm_start {self.warm_start!r} and objective {self.objective!r}")


@dataclass
class PretrainConfig(RLConfig):
    """Hyperparameters of a ``placer pretrain`` run (saved with it; a resume must match, `export` aside)."""

    samples: int = redefault(RLConfig, "samples", 16)
    """Pre-training's K: half of training's, since each step is one of many environments."""
    groups: int = redefault(RLConfig, "groups", 128)
    """Pre-training's G, which zero-shot placement and fine-tuning use too (the policy card keeps it)."""
    kind_groups: bool = redefault(RLConfig, "kind_groups", False)
    """Off: the shipped policy was trained on heavy-edge groups."""
    balanced_groups: bool = redefault(RLConfig, "balanced_groups", False)
    """Off: the shipped policy was trained on heavy-edge groups."""
    learning_rate: float = redefault(RLConfig, "learning_rate", 1e-3)
    """REINFORCE's Adam step across environments: half of one graph's."""
    entropy_weight: float = redefault(RLConfig, "entropy_weight", 0.005)
    """Half of one graph's: across environments the policy stays spread out longer."""
    imitation_learning_rate: float = setting(3e-3, POSITIVE_NUMBER)
    """Adam's step size while imitating the teachers."""
    imitation_fraction: float = setting(0.4, Rule("fraction"))
    """Share of the budget spent imitating the teachers before REINFORCE."""
    teachers: tuple[str, ...] = setting(("single", "expert", "metis", "heft", "m_topo"),
                                        Rule("heuristics"))
    """Heuristics whose best placement each environment imitates: those that take a second or two on 10k ops."""
    refine_teachers: float = setting(0.0, Rule("seconds", least=0))
    """Seconds of local search improving each training pair's teacher (0: the heuristics' own)."""
    export: str = setting("validation", Rule("choice", choices=EXPORT_RULES))
    """What ``DIR/policy`` holds: the checkpoint fastest on the validation graphs, or the last; no training change."""
