"""The learned placer: grouping, features, the seq2seq policy, REINFORCE training, checkpoints.

Heavy imports (TensorFlow) happen inside `policy`, `optimizer` and the
`Trainer`, so importing `placer.rl.grouping` or `placer.rl.features` stays cheap.
"""
