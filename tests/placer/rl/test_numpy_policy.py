"""The NumPy forward pass's thread rule (its numbers are checked against TensorFlow in test_policy)."""

import numpy as np
from threadpoolctl import threadpool_info

from placer.rl import numpy_policy


def blas_threads() -> set[int]:
    return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}


def test_the_pass_runs_on_one_blas_thread_and_restores_the_limit(monkeypatch):
    seen = []
    run = numpy_policy._run

    def spy(w, b, x):
        seen.append(blas_threads())
        return run(w, b, x)

    monkeypatch.setattr(numpy_policy, "_run", spy)
    before = blas_threads()
    F, H = 3, 4
    rng = np.random.default_rng(0)
    weights = {"embed_w": rng.normal(size=(F, H)).astype(np.float32), "embed_b": np.zeros(H, np.float32),
               "fwd.w": rng.normal(size=(2 * H, 4 * H)).astype(np.float32), "fwd.b": np.zeros(4 * H, np.float32),
               "bwd.w": rng.normal(size=(2 * H, 4 * H)).astype(np.float32), "bwd.b": np.zeros(4 * H, np.float32)}
    states = numpy_policy.encode(weights, rng.normal(size=(5, F)).astype(np.float32))
    assert states.shape == (5, 2 * H)
    assert seen and all(s == {1} for s in seen if s)
    assert blas_threads() == before
