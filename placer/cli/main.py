"""Entry point of the `placer` command: parse, dispatch, turn errors into one line.

Each command is a module of this package with ``add_parser(subparsers)`` and
``run(args) -> int``. Modules import only the standard library at top level,
so ``placer --help`` stays fast; a command imports what it needs (numba,
TensorFlow) when it runs.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# Order here is the order of `placer --help`.
COMMANDS = [
    "validate",
    "simulate",
    "clusters",
    "place",
    "compare",
    "train",
    "pretrain",
    "import",
    "import-keras",
    "import-split",
    "profile",
    "detect-cluster",
    "calibrate",
    "measure",
    "export",
    "serve",
]
# Commands whose module is not the command's name ("import" is a Python keyword).
MODULES = {"import": "import_graph"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="placer",
        description="Learned device placement: which device should run each op of a TensorFlow graph.",
    )
    parser.add_argument("--version", action="version", version=f"placer {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        module = importlib.import_module(f"placer.cli.{MODULES.get(name, name.replace('-', '_'))}")
        module.add_parser(sub)
    return parser


def _parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """`parser.parse_args`, but an argument no option takes is reported by its command's parser.

    argparse leaves a subcommand's unknown arguments to the top-level parser,
    whose error shows ``usage: placer ...``; the command's own usage line is
    the one that helps.
    """
    args, extra = parser.parse_known_args(argv)
    if extra:
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        commands.choices[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _version() -> str:
    from placer import __version__

    return __version__


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 success, 1 error, `EXIT_INTERRUPTED` interrupted)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    parser = build_parser()
    args = _parse(parser, argv)
    from placer.cli.common import EXIT_INTERRUPTED, os_error_line, sigterm_as_ctrl_c
    from placer.errors import PlacerError, interrupted

    try:
        with sigterm_as_ctrl_c():
            code = args.run(args)
    except PlacerError as e:
        print(f"placer {args.command}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"placer {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return 1
    except OSError as e:  # the system refused (read-only folder, full disk...): not a bug, so no "internal error"
        print(f"placer {args.command}: error: {os_error_line(e)}", file=sys.stderr)
        return 1
    except MemoryError:  # the input asks for more than the machine has (a huge batch, a huge layer)
        print(f"placer {args.command}: error: out of memory: the graph or model, at the sizes given, needs more "
              "memory than this machine has", file=sys.stderr)
        return 1
    except Exception as e:  # a bug, but still one line unless asked for more
        if interrupted(e):  # Ctrl-C inside compiled code (numba) comes back wrapped in a SystemError
            print(f"placer {args.command}: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        if os.environ.get("PLACER_DEBUG"):
            raise
        if type(e).__name__ == "ResourceExhaustedError":  # TensorFlow's (class named: no TF import) for two causes
            if "No space left on device" in str(e):  # a full disk where TensorFlow writes (a checkpoint)
                print(f"placer {args.command}: error: no space left on device ({_first_line(e)})", file=sys.stderr)
            else:
                print(f"placer {args.command}: error: out of memory in TensorFlow: the model, at the sizes given, "
                      f"needs more memory than this machine has ({_first_line(e)})", file=sys.stderr)
            return 1
        print(f"placer {args.command}: internal error: {type(e).__name__}: {_first_line(e)} "
              "(set PLACER_DEBUG=1 for the traceback)", file=sys.stderr)
        return 1
    return int(code or 0)


def _first_line(error: Exception, most: int = 300) -> str:
    """The first line of `error`'s message (TensorFlow's span pages), "..." where more was cut."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if not lines:
        return ""
    cut = len(lines) > 1 or len(lines[0]) > most
    return lines[0][:most] + (" ..." if cut else "")


if __name__ == "__main__":
    sys.exit(main())
