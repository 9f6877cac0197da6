"""Pre-training: one placement policy trained over a corpus of graphs and several clusters.

Each (graph, cluster) pair is an environment (`environment`): its grouping,
its size-free features (`placer.rl.features`), a simulator, and a teacher
placement (the best of a few cheap heuristics, projected onto the groups).
The one policy sees every environment in turn (`pretrainer`), so nothing it
learns can be tied to one graph's size or one cluster's device count
(devices are an input of the policy, up to `placer.rl.policy.MAX_DEVICES`).

Two phases share the budget (`loop`):

1. imitation (behaviour cloning, as GDP and Placeto warm-start): maximise the
   log-probability of each environment's teacher placement;
2. REINFORCE, as in `placer.rl.trainer`, but across environments: K samples
   per step from one environment, rewards and advantages as `placer.rl.reinforce`
   (the same scale on every graph), one EMA baseline per environment, and the
   environment's best placement so far replayed among the samples
   (self-imitation), the teacher being the first best.

Validation environments (graphs of families neither trained on nor held
out, the manifest's "validation" split; `corpus`) choose what is exported
(`files`): the policy in ``DIR/policy`` is the evaluated checkpoint whose
greedy placements are fastest on them, because zero-shot quality on unseen
graphs swings between checkpoints while the training graphs keep improving.
With no validation graphs, or ``export="last"``, the latest checkpoint is
exported.

A run can start from a saved policy instead of random weights (`start_from`):
pre-training continued, typically REINFORCE alone (``imitation_fraction=0``).

The modules, one concern each: `corpus` (manifest and splits), `environment`
(environments and their teachers, ``teachers.json``), `pretrainer` (the
steps and the greedy evaluation), `files` (checkpoint, resume, export) and
`loop` (the run with its ``history.csv``, ``progress.json`` and
``curve.png``, `placer.rl.run_folder`). The names below are what the command
(`placer.cli.pretrain`) and the benchmarks use.
"""

from placer.rl.config import PretrainConfig
from placer.rl.pretrain.corpus import chosen_entries, read_manifest, training_entries, validation_entries
from placer.rl.pretrain.environment import (DEFAULT_TEACHERS, TEACHERS_FILE, Environment, canonical_labels, env_key,
                                            load_teachers, make_environment, save_teachers, teacher_placement)
from placer.rl.pretrain.files import (CHECKPOINT_DIR, POLICY_DIR, STATE_FILE, check_same_environments, export,
                                      exported_card, restore, save, saved_config, should_export)
from placer.rl.pretrain.loop import HISTORY_FIELDS, run, tune_sampling
from placer.rl.pretrain.pretrainer import EnvState, Pretrainer, PretrainState, start_from

__all__ = ["CHECKPOINT_DIR", "DEFAULT_TEACHERS", "HISTORY_FIELDS", "POLICY_DIR", "STATE_FILE", "TEACHERS_FILE",
           "EnvState", "Environment", "PretrainConfig", "PretrainState", "Pretrainer", "canonical_labels",
           "check_same_environments", "chosen_entries", "env_key", "export", "exported_card", "load_teachers",
           "make_environment", "read_manifest", "restore", "run", "save", "save_teachers", "saved_config",
           "should_export", "start_from", "teacher_placement", "training_entries", "tune_sampling",
           "validation_entries"]
