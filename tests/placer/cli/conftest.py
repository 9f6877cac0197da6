"""Run the CLI in-process and capture what a user would see."""

from dataclasses import dataclass

import pytest

from placer.cli.main import main


@dataclass
class Run:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys):
    """`cli("simulate", "g.json", ...)` -> Run(code, out, err)."""

    def run(*argv: str) -> Run:
        try:
            code = main([str(a) for a in argv])
        except SystemExit as e:  # argparse usage errors and --help
            code = e.code if isinstance(e.code, int) else 1
        captured = capsys.readouterr()
        return Run(code, captured.out, captured.err)

    return run
