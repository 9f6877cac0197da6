"""Adam as a `tf.Module`: its moments are plain variables a `tf.train.Checkpoint` saves.

Written out (a dozen lines) rather than taken from Keras so that the whole
training state lives in one checkpoint and runs inside an XLA-compiled step.
"""

from __future__ import annotations

import tensorflow as tf


class Adam(tf.Module):
    """Adam (Kingma & Ba, 2015) over a fixed list of variables.

    Parameters
    ----------
    variables : the variables it updates, in the order gradients are given.
    learning_rate, beta1, beta2, epsilon : the usual.
    """

    def __init__(self, variables, learning_rate: float = 1e-3, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8, name: str = "adam"):
        super().__init__(name=name)
        self._vars = list(variables)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self.learning_rate = tf.Variable(float(learning_rate), name="learning_rate", trainable=False)
        self.t = tf.Variable(0.0, name="t", trainable=False)
        self.m = [tf.Variable(tf.zeros_like(v), name="m", trainable=False) for v in self._vars]
        self.v = [tf.Variable(tf.zeros_like(v), name="v", trainable=False) for v in self._vars]

    def apply(self, grads) -> None:
        """Take one step along `grads` (one per variable)."""
        self.t.assign_add(1.0)
        b1, b2 = self.beta1, self.beta2
        lr = self.learning_rate * tf.sqrt(1.0 - tf.pow(b2, self.t)) / (1.0 - tf.pow(b1, self.t))
        for var, g, m, v in zip(self._vars, grads, self.m, self.v):
            m.assign(b1 * m + (1.0 - b1) * g)
            v.assign(b2 * v + (1.0 - b2) * tf.square(g))
            var.assign_sub(lr * m / (tf.sqrt(v) + self.epsilon))
