"""Generic file I/O: reading bytes and JSON with errors that name the file, writing atomically.

Every file the project reads or writes goes through here (graphs, clusters,
placements, policies, run folders), so a missing file, a corrupt gzip stream
or a half-written output reads the same everywhere. Gzip is detected from a
file's first bytes, not its name, so a `.json` that is really compressed
still loads.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import math
import os
import re
import zlib
from pathlib import Path
from typing import Any

from placer.errors import PlacerError

_GZIP_MAGIC = b"\x1f\x8b"


def read_json_file(path: str | os.PathLike, what: str = "file") -> Any:
    """Parse a JSON (or gzip JSON) file, with errors that name the file.

    Raises
    ------
    PlacerError
        If the file is missing, unreadable, not gzip when it claims to be, or not JSON.
    """
    where = f"{what} {str(Path(path))!r}"
    return parse_json_bytes(read_bytes(path, where), where)


def read_bytes(path: str | os.PathLike, where: str, error: type[PlacerError] = PlacerError) -> bytes:
    """A file's bytes, or one `error` starting with `where` if it cannot be read.

    Parameters
    ----------
    path : the file.
    where : how messages name the file, e.g. ``"graph 'g.json'"``.
    error : the PlacerError subclass to raise (importers raise ModelImportError).

    Raises
    ------
    PlacerError
        (of class `error`) if the file is missing, a directory, or unreadable.
    """
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise error(f"{where}: no such file") from None
    except IsADirectoryError:
        raise error(f"{where}: is a directory") from None
    except OSError as e:
        raise error(f"{where}: cannot read ({e.strerror})") from None


def gunzip(raw: bytes, where: str = "input") -> bytes:
    """`raw` inflated when it is gzip-compressed (by its magic bytes), else `raw` itself.

    Raises
    ------
    PlacerError
        If the gzip data is corrupt or cut short.
    """
    if raw[:2] != _GZIP_MAGIC:
        return raw
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as e:  # bad header, cut short, bad deflate data
        raise PlacerError(f"{where}: corrupt gzip data ({e})") from None


def parse_json_bytes(raw: bytes, where: str = "input") -> Any:
    """Parse JSON bytes, gunzipping first when they are gzip-compressed; a string that is not valid
    Unicode is refused here (`check_unicode`), before anything holds it."""
    raw = gunzip(raw, where)
    try:
        value = json.loads(raw, parse_int=parse_json_int)
    except UnicodeDecodeError:
        raise PlacerError(f"{where}: not JSON (binary data)") from None
    except json.JSONDecodeError as e:
        raise PlacerError(f"{where}: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    except RecursionError:  # arrays or objects nested thousands deep: Python's parser recurses
        raise PlacerError(f"{where}: JSON nested too deeply") from None
    problem = check_unicode(value, raw)
    if problem:
        raise PlacerError(f"{where}: {problem}")
    return value


def parse_json_int(text: str) -> int | float:
    """A JSON integer; one of over 308 digits, beyond any float, is read as infinity (as JavaScript does).

    Every number field is then refused as "must be finite" by its validator,
    rather than failing later in float() (OverflowError) or in int() itself
    (Python refuses over 4,300 digits).
    """
    if len(text.lstrip("-")) > 308:
        return -math.inf if text.startswith("-") else math.inf
    return int(text)


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
"""How a surrogate code point reaches a JSON text: as an escape (raw surrogate bytes are not UTF-8)."""
_SURROGATE = re.compile("[\ud800-\udfff]")


def check_unicode(value: Any, raw: bytes) -> str | None:
    """What in `value`, decoded from the JSON text `raw`, is not valid Unicode (a lone surrogate, which JSON's
    ``\\ud800`` escape can carry but UTF-8 cannot), naming the op where it is inside a graph's ``nodes``;
    None if all is valid.

    Such a string was stored and then failed every answer that held it (a 500 on each GET). Only a text with
    a surrogate escape is walked: raw surrogate bytes are not UTF-8, so that is the only way in.
    """
    if not _SURROGATE_ESCAPE.search(raw):
        return None
    stack: list[tuple[Any, tuple]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            found = _SURROGATE.search(item)
            if found:
                return f"{_where(value, path)}: {item!r} is not valid Unicode (lone surrogate " \
                       f"U+{ord(found.group()):04X}); names and strings must be Unicode scalar values"
        elif isinstance(item, dict):
            for k, v in item.items():
                stack.append((k, path + ("(key)",)))
                stack.append((v, path + (k,)))
        elif isinstance(item, list):
            stack.extend((v, path + (i,)) for i, v in enumerate(item))
    return None


def _where(root: Any, path: tuple) -> str:
    """``op 'a' (nodes[3]).inputs[0]`` for a path inside a graph's nodes; the plain path otherwise."""
    shown = ".".join(str(p) for p in path) or "the body"
    for i in range(len(path) - 1):
        if path[i] == "nodes" and isinstance(path[i + 1], int):
            node = _at(root, path[: i + 2])
            name = node.get("name") if isinstance(node, dict) else None
            rest = ".".join(str(p) for p in path[i + 2:])
            return f"op {name!r} (nodes[{path[i + 1]}])" + (f" {rest}" if rest else "")
    return shown


def _at(root: Any, path: tuple) -> Any:
    for p in path:
        root = root[p]
    return root


def write_atomic(path: Path, data: bytes) -> None:
    """Write bytes to `path` via a temporary file in the same folder and a rename.

    When the system refuses (read-only folder, full disk) the temporary file is
    removed and the OSError names `path`, the file the caller asked for, not
    the temporary name the user never gave. A `path` that is a device or a pipe
    (``-o /dev/stdout``, a fifo) is written to as it is: a rename would put a
    regular file in its place (as root, in /dev).
    """
    if path.exists() and not path.is_file() and not path.is_dir():
        try:
            with open(path, "wb") as f:
                f.write(data)
        except OSError as e:
            raise OSError(e.errno, e.strerror, str(path)) from None
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise OSError(e.errno, e.strerror, str(path)) from None
