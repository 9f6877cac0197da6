"""Importers: model files and live TensorFlow/Keras objects into an `OpGraph`.

A small format registry lets `import_file` read any supported file by its
content, never its name: our JSON graph format, a TensorFlow `GraphDef` in
binary (``.pb``) or text (``.pbtxt``) form, each plain or gzip-compressed (the
bytes are inflated before any format sees them). Another format is one call
away::

    register_format("msr", sniff=lambda raw, path: ..., load=lambda raw, name: ...)

`sniff(raw, path) -> bool` says whether the bytes look like the format (cheap,
no full parse); `load(raw, name) -> OpGraph` parses them and raises
`ModelImportError` (or another `PlacerError`) with one clear line. Formats are
tried in registration order, so put specific formats before catch-alls.

TensorFlow is imported only inside the loaders, so importing this package is
cheap (the CLI's ``--help`` and the service's start stay fast).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from placer.errors import GraphError, ModelImportError, PlacerError
from placer.fileio import gunzip, parse_json_bytes, read_bytes
from placer.graph import OpGraph

Sniff = Callable[[bytes, "str | None"], bool]
Load = Callable[[bytes, str], OpGraph]


@dataclass(frozen=True)
class Format:
    """One importable file format: a cheap content test and a loader."""

    name: str
    sniff: Sniff
    load: Load


FORMATS: dict[str, Format] = {}
_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"


def register_format(name: str, sniff: Sniff, load: Load) -> None:
    """Add (or replace) a file format known to `import_file`.

    Parameters
    ----------
    name : the format's name, as given to ``import_file(..., fmt=name)`` and ``placer import --format``.
    sniff : ``sniff(raw: bytes, path: str | None) -> bool``; True when the bytes look like this format.
    load : ``load(raw: bytes, name: str) -> OpGraph``; `name` is the graph name to use.
    """
    if not name or not isinstance(name, str):
        raise ValueError("a format needs a non-empty name")
    FORMATS[name] = Format(name, sniff, load)


def detect_format(raw: bytes, path: str | None = None) -> str:
    """Name of the first registered format whose sniff accepts `raw`.

    Raises
    ------
    ModelImportError
        If no format recognises the bytes (empty file, unknown file type).
    """
    where = f"{path!r}" if path else "input"
    raw = gunzip(raw, where)
    if not raw:
        raise ModelImportError(f"{where}: empty file")
    for fmt in FORMATS.values():
        try:
            if fmt.sniff(raw, path):
                return fmt.name
        except Exception:  # a sniff must never decide the outcome by crashing
            continue
    if raw[:8] == _HDF5_MAGIC:  # Keras 2's legacy format: Keras 3 reads it only with the model's own code
        raise ModelImportError(f"{where}: a Keras HDF5 (.h5) file, which `placer import` does not read; load the "
                               "model where it was made and save it as .keras (model.save('model.keras')) or as a "
                               "SavedModel (model.export(folder))")
    raise ModelImportError(
        f"{where}: not a recognised model file (known formats: {', '.join(FORMATS)}; `placer import` also "
        "takes a SavedModel folder and a .keras file)"
    )


def import_bytes(raw: bytes, name: str, fmt: str | None = None, path: str | None = None) -> OpGraph:
    """Import model bytes, plain or gzip-compressed (format detected by content unless `fmt` is given)."""
    raw = gunzip(raw, f"{path!r}" if path else "input")
    if fmt is None:
        fmt = detect_format(raw, path)
    elif fmt not in FORMATS:
        raise ModelImportError(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")
    return FORMATS[fmt].load(raw, name)


def import_file(path: str | os.PathLike, fmt: str | None = None, name: str | None = None) -> OpGraph:
    """Import a model file into an `OpGraph`.

    Parameters
    ----------
    path : the file (JSON or gzip JSON graph, GraphDef ``.pb`` or ``.pbtxt``, or any registered format).
    fmt : a registered format name; by default the format is detected from the content.
    name : the graph's name; by default the file name without its extensions.

    Raises
    ------
    ModelImportError
        If the file is missing, empty, of no known format, corrupt or truncated.
    PlacerError
        Another subclass (a GraphError for a JSON graph with a duplicate name...),
        as the format's loader raised it; every message starts with the file.
    """
    path = Path(path)
    raw = read_bytes(path, repr(str(path)), ModelImportError)
    graph_name = name or default_name(path)
    try:
        return import_bytes(raw, graph_name, fmt, str(path))
    except PlacerError as e:  # loaders see bytes, not the file: name it here, keeping the error's class
        msg = str(e)
        if str(path) in msg:
            raise
        raise type(e)(f"{str(path)!r}: {msg}") from None


def read_model_bytes(path: str | os.PathLike) -> bytes:
    """A model file's bytes, inflated when it is gzip-compressed (``model.pb.gz``), with errors naming it."""
    where = repr(str(path))
    return gunzip(read_bytes(path, where, ModelImportError), where)


def default_name(path: str | os.PathLike) -> str:
    """A graph name from a file name: ``graphs/resnet50.json.gz`` -> ``resnet50``."""
    path = Path(path)
    if path.name == "graph.txt" and path.parent.name:  # PipeDream profiles: <model>/graph.txt
        return path.parent.name
    stem = path.name
    for ext in (".gz", ".json", ".pbtxt", ".pb", ".txt"):
        if stem.endswith(ext) and len(stem) > len(ext):
            stem = stem[: -len(ext)]
    return stem or "graph"


# -- built-in formats ----------------------------------------------------
_PBTXT_START = re.compile(rb"^\s*(#[^\n]*\n\s*)*(node|versions|library)\s*[{:]")


def _sniff_json(raw: bytes, path: str | None) -> bool:
    return raw.lstrip()[:1] == b"{"


def _load_json(raw: bytes, name: str) -> OpGraph:
    data = parse_json_bytes(raw, "graph")
    try:
        return OpGraph.from_dict(data)
    except GraphError:
        raise
    except PlacerError as e:
        raise ModelImportError(str(e)) from None


def _sniff_pbtxt(raw: bytes, path: str | None) -> bool:
    return _PBTXT_START.match(raw[:4096]) is not None


def _sniff_graphdef(raw: bytes, path: str | None) -> bool:
    # A serialized GraphDef starts with field 1 (node), 2 (library), 3 (version)
    # or 4 (versions), all length-delimited except `version` (varint); and unlike
    # a text file that starts with a newline (0x0a), it holds control bytes (its
    # other field tags and short lengths).
    return raw[:1] in (b"\x0a", b"\x12", b"\x18", b"\x22") and not _is_text(raw[:4096])


def _is_text(head: bytes) -> bool:
    """Printable UTF-8 text (a character cut at the end of `head` aside)."""
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 3:
            return False
        text = head[:e.start].decode("utf-8")
    return all(c.isprintable() or c in "\t\n\r" for c in text)


def _load_pbtxt(raw: bytes, name: str) -> OpGraph:
    from placer.importers.graphdef import from_graphdef_text

    return from_graphdef_text(raw, name)


def _load_graphdef(raw: bytes, name: str) -> OpGraph:
    from placer.importers.graphdef import from_graphdef_bytes

    return from_graphdef_bytes(raw, name)


# Public profiled datasets (placer.importers.msr, .pipedream; no TensorFlow). An MSR
# workload is JSON too, so it must be tried before the JSON catch-all.
from placer.importers import msr as _msr, pipedream as _pipedream  # noqa: E402

register_format("msr", _msr.sniff_bytes, _msr.load_bytes)
register_format("pipedream", _pipedream.sniff_bytes, _pipedream.load_bytes)
register_format("json", _sniff_json, _load_json)
register_format("pbtxt", _sniff_pbtxt, _load_pbtxt)
register_format("graphdef", _sniff_graphdef, _load_graphdef)


def __getattr__(attr: str):
    """Lazy access to the TensorFlow-backed importers (keeps this package light)."""
    if attr in ("from_graphdef", "from_graphdef_bytes", "from_graphdef_text"):
        from placer.importers import graphdef

        return getattr(graphdef, attr)
    if attr in ("from_keras", "from_tf_function", "keras_application", "keras_step", "application_model"):
        from placer.importers import keras_models

        return getattr(keras_models, attr)
    raise AttributeError(f"module 'placer.importers' has no attribute {attr!r}")


__all__ = [
    "FORMATS", "Format", "register_format", "detect_format", "import_bytes", "import_file", "default_name",
    "read_model_bytes",
    "from_graphdef", "from_graphdef_bytes", "from_graphdef_text", "from_keras", "from_tf_function",
    "keras_application", "keras_step", "application_model",
]
