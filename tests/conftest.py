"""Fixtures shared by the whole test tree."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
