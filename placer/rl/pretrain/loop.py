"""The run: steps until the budget is spent, with its files written as it goes.

The first `PretrainConfig.imitation_fraction` of the budget imitates, the
rest is REINFORCE. The greedy policy is evaluated (and perhaps exported)
every `EVAL_EVERY_SECONDS`, a checkpoint written every
`CHECKPOINT_EVERY_SECONDS` and at the end, with ``history.csv``,
``progress.json`` and ``curve.png`` (`placer.rl.run_folder`); once done, the
exported policy's sampling temperature is chosen on the validation graphs.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from placer.errors import uninterruptible
from placer.rl.pretrain.files import POLICY_DIR, export, save
from placer.rl.pretrain.pretrainer import Pretrainer
from placer.rl.run_folder import CURVE_FILE, HISTORY_FILE, Cadence, History, plot_pretraining_curve, write_progress
from placer.rl.saved_policy import load_policy, save_policy


CHECKPOINT_EVERY_SECONDS = 60.0
EVAL_EVERY_SECONDS = 60.0
HISTORY_FIELDS = ("step", "phase", "env", "elapsed_seconds", "loss", "grad_norm", "mean_step_time_ratio",
                  "min_step_time_ratio", "oom_fraction", "entropy")


def run(p: Pretrainer, out: Path, *, budget_seconds: float, name: str = "pretrained", version: str = "1",
        on_step: Callable[[dict[str, Any]], None] | None = None, should_stop: Callable[[], bool] = lambda: False,
        resumed: bool = False, on_temperature: Callable[[float, float], None] | None = None,
        max_steps: int | None = None) -> str:
    """Train until the budget (whole run, resumes included) is spent, or `max_steps` steps are made in all
    (a limit that does not depend on the machine's speed, for tests); returns ``"done"`` or ``"interrupted"``.

    Each step's update and its history row are `placer.errors.uninterruptible` (a second Ctrl-C there stops
    the run after the step), so the checkpoint saved on the way out holds one step's weights and count.
    Writes history.csv, progress.json, curve.png, checkpoints and ``out/policy`` as it goes; once
    done, chooses the exported policy's sampling temperature (`tune_sampling`; `on_temperature`
    hears each one measured); `should_stop` stops that too, and a resume chooses it again.
    """
    s = p.state
    history = History(out / HISTORY_FILE, HISTORY_FIELDS, keep_until=s.step if resumed else 0, flush_every_row=False)
    evaluations, checkpoints = Cadence(EVAL_EVERY_SECONDS), Cadence(CHECKPOINT_EVERY_SECONDS)
    if not s.evals:
        export(p, out, name, version)
    reason = "done"
    try:
        while s.elapsed_seconds < budget_seconds and (max_steps is None or s.step < max_steps):
            if should_stop():
                reason = "interrupted"
                break
            t0 = time.perf_counter()
            imitating = s.elapsed_seconds < p.config.imitation_fraction * budget_seconds
            p.set_learning_rate(p.config.imitation_learning_rate if imitating else p.config.learning_rate)
            rollout = None if imitating else p.reinforce_rollout()  # a second Ctrl-C still stops this at once
            with uninterruptible():  # weights, state and the history row of the step change together
                row = p.imitation_step() if imitating else p.reinforce_learn(rollout)
                s.elapsed_seconds += time.perf_counter() - t0
                row["elapsed_seconds"] = s.elapsed_seconds
                history.append(row)
                if on_step is not None:
                    on_step(row)
            now = time.monotonic()
            if evaluations.due(now):
                export(p, out, name, version)
                evaluations.done(now)
            if checkpoints.due(now):
                history.flush()
                save(p, out, name, version)
                _progress(out, p, budget_seconds, "running")
                checkpoints.done(now)
    finally:
        history.close()
        export(p, out, name, version)
        save(p, out, name, version)
        _progress(out, p, budget_seconds, "done" if reason == "done" else "interrupted")
        plot_pretraining_curve(p.state.evals, out / CURVE_FILE, pairs=len(p.envs))
    if reason == "done" and p.validation:
        if tune_sampling(p, out, on_temperature, should_stop) is None:  # stopped: a resume tunes again
            reason = "interrupted"
            _progress(out, p, budget_seconds, reason)
    return reason


def tune_sampling(p: Pretrainer, out: Path, on_temperature: Callable[[float, float], None] | None = None,
                  should_stop: Callable[[], bool] = lambda: False) -> dict[str, Any] | None:
    """Choose the exported policy's sampling temperature on the validation environments
    (`placer.rl.sampling`) and write it to its card; None (temperature 1) without validation graphs,
    or when `should_stop` cut the sweep short (the card is left as it was).

    Done once the run is over, because a later export would replace the card.
    """
    from placer.rl.sampling import choose_temperature

    if not p.validation:
        return None
    policy = load_policy(out / POLICY_DIR)
    sampling = choose_temperature(policy, p.validation, seed=p.config.seed, on_temperature=on_temperature,
                                  should_stop=should_stop)
    if sampling is None:
        return None
    save_policy(out / POLICY_DIR, policy.weights, {**policy.card, "sampling": sampling})
    return sampling


def _progress(out: Path, p: Pretrainer, budget: float, state: str) -> None:
    last = p.state.evals[-1] if p.state.evals else {}
    data = {"state": state, "step": p.state.step, "imitation_steps": p.state.imitation_steps,
            "samples": p.state.samples, "elapsed_seconds": p.state.elapsed_seconds, "budget_seconds": budget,
            "greedy_geomean_ratio": last.get("geomean_ratio"),
            "validation_geomean_ratio": last.get("validation_geomean_ratio"), "exported": p.exported or None}
    write_progress(out, data)
