"""`bench/bench_service.py`: bad settings are one line before the server starts."""

import argparse
import sys

import pytest

from bench import bench_service
from placer.errors import PlacerError

DEFAULTS = {"methods": "metis,heft", "cluster": "4gpu", "requests": 30, "clients": 20, "load_seconds": 60.0,
            "load_method": "metis", "workers": 1, "big_uploads": 3}


@pytest.mark.parametrize("argv, message", [
    (["--methods", "metis,hfet"], "unknown heuristic 'hfet'"),
    (["--load-method", "nosuch"], "unknown heuristic 'nosuch'"),
    (["--cluster", "3gpu"], "unknown cluster preset '3gpu'"),
    (["--requests", "0"], "--requests must be at least 1, got 0"),
    (["--load-seconds", "-1"], "--load-seconds must be positive, got -1"),
    (["--security", "--big-uploads", "0"], "--big-uploads must be at least 1, got 0"),
])
def test_bad_settings_are_refused_before_the_server_starts(monkeypatch, argv, message):
    """An unknown method was an HTTPStatusError traceback from the first request, the server already up."""
    monkeypatch.setattr(bench_service, "start_server", lambda *a, **k: pytest.fail("server started"))
    monkeypatch.setattr(sys, "argv", ["bench_service.py", *argv])
    with pytest.raises(PlacerError, match=message):
        bench_service.main()


def test_the_defaults_pass():
    bench_service.check_args(argparse.Namespace(**DEFAULTS))
