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
    """Parse JSON bytes, gunzipping first when they are gzip-compressed."""
    raw = gunzip(raw, where)
    try:
        return json.loads(raw, parse_int=_parse_int)
    except UnicodeDecodeError:
        raise PlacerError(f"{where}: not JSON (binary data)") from None
    except json.JSONDecodeError as e:
        raise PlacerError(f"{where}: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    except RecursionError:  # arrays or objects nested thousands deep: Python's parser recurses
        raise PlacerError(f"{where}: JSON nested too deeply") from None


def _parse_int(text: str) -> int | float:
    """A JSON integer; one of over 308 digits, beyond any float, is read as infinity (as JavaScript does).

    Every number field is then refused as "must be finite" by its validator,
    rather than failing later in float() (OverflowError) or in int() itself
    (Python refuses over 4,300 digits).
    """
    if len(text.lstrip("-")) > 308:
        return -math.inf if text.startswith("-") else math.inf
    return int(text)


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
