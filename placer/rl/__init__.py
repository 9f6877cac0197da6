"""The learned placer: features, the seq2seq policy, REINFORCE training, checkpoints.

Groups come from `placer.grouping` (the heuristics use them too). Heavy
imports (TensorFlow) happen inside `policy`, `optimizer` and the `Trainer`, so
importing `placer.rl.features` stays cheap.
"""

import os

# oneDNN's notice is printed through absl before TF_CPP_MIN_LOG_LEVEL is read; without oneDNN
# TensorFlow is also quiet and bit-for-bit repeatable, and the policy's small matmuls lose nothing.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# registers method "rl" with placer.placers.registry (see placer.rl.method)
from placer.rl import method as _method  # noqa: F401,E402
