"""The command line as a whole: help, startup cost, one-line errors."""

import json
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


def test_a_stray_argument_shows_the_commands_usage(cli, tmp_path):
    """argparse leaves a subcommand's unknown arguments to `placer`; the command's usage line is the useful one."""
    r = cli("place", tmp_path / "g.json", "--cluster", "4gpu", "--method", "single", "--steps", "1")
    assert r.code == 2
    assert "usage: placer place " in r.err and "placer place: error: unrecognized arguments: --steps 1" in r.err


def test_a_refused_write_is_a_one_line_error(cli, tmp_path, monkeypatch):
    """The system refusing a file (here a full disk) is the user's to fix: one line naming it, not an internal error."""
    import errno
    import os

    from placer.graph_io import save_graph
    from placer.synthetic import layered_graph

    save_graph(layered_graph(5, seed=0), tmp_path / "g.json")

    def refuse(src, dst):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(src))

    monkeypatch.setattr("placer.fileio.os.replace", refuse)
    r = cli("import", tmp_path / "g.json", "-o", tmp_path / "out.json")
    assert r.code == 1
    assert r.err == f"placer import: error: {str(tmp_path / 'out.json')!r}: No space left on device\n"


def test_an_internal_error_is_one_line(cli, monkeypatch):
    """A bug whose message spans lines (TensorFlow's do: a page of user code and arguments) still prints one."""
    def fail(args):
        raise ValueError("in user code:\n\n    File \"x.py\", line 1\n\n    ValueError: shapes differ\n")

    monkeypatch.setattr("placer.cli.validate.run", fail)
    monkeypatch.delenv("PLACER_DEBUG", raising=False)
    r = cli("validate", "g.json")
    assert r.code == 1
    assert r.err == ("placer validate: internal error: ValueError: in user code: ... "
                     "(set PLACER_DEBUG=1 for the traceback)\n")


def test_running_out_of_memory_is_the_inputs_error_not_a_bug(cli, monkeypatch):
    """A huge batch or layer asks for more than the machine has: Python's MemoryError and TensorFlow's
    ResourceExhaustedError (matched by name, so the CLI never imports TensorFlow to catch it) say so."""
    class ResourceExhaustedError(Exception):
        pass

    monkeypatch.delenv("PLACER_DEBUG", raising=False)
    for error in (MemoryError("Unable to allocate 29.1 TiB"),
                  ResourceExhaustedError("OOM when allocating tensor with shape[1280,2000000000]\n" + "x" * 500)):
        def fail(args, error=error):
            raise error

        monkeypatch.setattr("placer.cli.validate.run", fail)
        r = cli("validate", "g.json")
        assert r.code == 1 and r.err.count("\n") == 1 and "internal error" not in r.err, r.err
        assert r.err.startswith("placer validate: error: out of memory")
    assert "shape[1280,2000000000] ..." in r.err
    full = ResourceExhaustedError("run/checkpoint/step-7_temp/part-0; No space left on device [Op:SaveV2]")

    def write(args):
        raise full

    monkeypatch.setattr("placer.cli.validate.run", write)
    r = cli("validate", "g.json")  # TensorFlow reports a full disk with the same class
    assert r.code == 1 and r.err.startswith("placer validate: error: no space left on device (run/checkpoint/")


SIGTERMED = """
import os, signal, sys, time
from placer.cli.main import main
from placer.placers import registry

@registry.register("test_sigterm", description="SIGTERM arrives while it places", heuristic=False)
def terminated(graph, cluster):
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(60)  # the signal's handler ends the sleep
    raise AssertionError("SIGTERM did not stop the command")

sys.exit(main(sys.argv[1:]))
"""


def test_sigterm_stops_a_command_as_ctrl_c_does(layered_graph_file, tmp_path):
    """`kill` or a job runner's SIGTERM: one line, exit 130 and the rows saved so far kept, not a silent death."""
    saved = tmp_path / "rows.json"
    argv = ["compare", str(layered_graph_file(30)), "--cluster", "2gpu", "--methods", "single,test_sigterm",
            "--save", str(saved), "--quiet"]
    r = subprocess.run([sys.executable, "-c", SIGTERMED, *argv], capture_output=True, text=True, timeout=120)
    assert (r.returncode, r.stderr) == (130, "placer compare: interrupted\n")
    assert [row["method"] for row in json.loads(saved.read_text())] == ["single"]
