"""Read and write graphs in the JSON file format, plain or gzip-compressed.

Gzip is detected from the file's first bytes, not its name, so a `.json`
that is really compressed still loads (`placer.fileio`). A file of another
model format that `placer import` reads is named as such, which is why this
module sits with the importers, above the graph.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

from placer.errors import GraphError, PlacerError
from placer.fileio import read_bytes, read_json_file, write_atomic
from placer.graph import OpGraph
from placer.importers import detect_format


def load_graph(path: str | os.PathLike) -> OpGraph:
    """Load and validate a graph file (`.json` or `.json.gz`).

    Raises
    ------
    PlacerError
        Naming the file and the problem; for a model file of another format (a GraphDef, an MSR workload,
        a PipeDream profile) saying so and how to convert it, where "not valid JSON" would mislead.
    """
    try:
        return OpGraph.from_dict(read_json_file(path, "graph"))
    except PlacerError as e:
        other = _other_format(path)
        if other is not None:  # its JSON or field error would mislead: say what the file is
            raise type(e)(f"graph {str(path)!r}: {other}, not a graph file; "
                          f"`placer import {path} -o GRAPH.json.gz` converts it") from None
        if isinstance(e, GraphError):
            raise GraphError(f"graph {str(path)!r}: {e}") from None
        raise


def _other_format(path: str | os.PathLike) -> str | None:
    """What `path` is when it holds a model format `placer import` reads other than ours, else None."""
    try:
        fmt = detect_format(read_bytes(path, repr(str(path))), str(path))
    except PlacerError:
        return None
    return None if fmt == "json" else _FORMAT_NAMES.get(fmt, f"a {fmt} file")


_FORMAT_NAMES = {"msr": "an MSR dnn-partitioning workload", "pipedream": "a PipeDream profile",
                 "pbtxt": "a TensorFlow GraphDef (text)", "graphdef": "a TensorFlow GraphDef"}


def save_graph(graph: OpGraph, path: str | os.PathLike) -> None:
    """Write a graph; gzip-compressed when the name ends in `.gz`.

    The file is written to a temporary name and renamed, so a crash never
    leaves half a graph behind.
    """
    path = Path(path)
    text = json.dumps(graph.to_dict(), separators=(",", ":")).encode()
    data = gzip.compress(text, compresslevel=6, mtime=0) if path.suffix == ".gz" else text
    write_atomic(path, data)
