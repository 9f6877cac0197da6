"""The command line as a whole: help, startup cost, one-line errors."""

import subprocess
import sys

from placer.cli.main import COMMANDS


def test_every_command_has_help(cli):
    for name in COMMANDS:
        r = cli(name, "--help")
        assert r.code == 0 and "usage: placer" in r.out, name


def test_help_does_not_import_heavy_libraries():
    code = ("import sys; from placer.cli.main import build_parser; build_parser(); "
            "heavy = [m for m in ('tensorflow', 'numba', 'matplotlib', 'fastapi') if m in sys.modules]; "
            "print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_unknown_command_is_a_usage_error(cli):
    r = cli("frobnicate")
    assert r.code == 2 and "invalid choice" in r.err
