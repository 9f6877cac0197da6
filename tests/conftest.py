"""Fixtures shared by the whole test tree."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # the tests' own Ray instances report nothing either
