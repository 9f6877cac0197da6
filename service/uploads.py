"""Turn an uploaded body into a validated `OpGraph`, within the size limits.

Three formats arrive on ``POST /v1/graphs``: our JSON graph format (plain or
gzip), a binary TensorFlow GraphDef and a text GraphDef. Gzip is inflated
here with a ceiling (a few KiB of gzip can inflate to gigabytes); the op
count is checked before the expensive validation. TensorFlow is imported only
when a GraphDef actually arrives.
"""

from __future__ import annotations

import zlib
from typing import Any, Literal

from placer.errors import PlacerError
from placer.graph import OpGraph

UploadFormat = Literal["auto", "json", "graphdef"]
_GZIP_MAGIC = b"\x1f\x8b"


class PayloadTooLarge(Exception):
    """A body, an inflated body or a graph is over a configured limit (HTTP 413)."""


def inflate(data: bytes, limit: int, where: str = "upload") -> bytes:
    """Gunzip `data` when it is gzip, refusing to produce more than `limit` bytes.

    Raises
    ------
    PayloadTooLarge
        If the inflated data would exceed `limit` bytes.
    PlacerError
        If the gzip stream is corrupt or truncated.
    """
    if data[:2] != _GZIP_MAGIC:
        return data
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(data, limit + 1)
    except zlib.error as e:
        raise PlacerError(f"{where}: corrupt gzip data ({e})") from None
    if len(out) > limit:
        raise PayloadTooLarge(f"{where}: inflates to more than {limit} bytes (max_inflated_bytes)")
    if not d.eof:
        raise PlacerError(f"{where}: truncated gzip data")
    return out


def check_op_count(data: Any, max_ops: int, where: str = "graph") -> None:
    """Refuse a graph dict with more than `max_ops` nodes before validating it."""
    nodes = data.get("nodes") if isinstance(data, dict) else None
    if isinstance(nodes, list) and len(nodes) > max_ops:
        raise PayloadTooLarge(f"{where}: has {len(nodes)} ops; this service accepts at most {max_ops} (max_ops)")


def graph_from_upload(body: bytes, *, fmt: UploadFormat, name: str | None, content_type: str,
                      max_inflated: int, max_ops: int) -> tuple[OpGraph, str]:
    """Parse and validate an uploaded graph.

    Parameters
    ----------
    body : the request body as sent.
    fmt : ``json``, ``graphdef`` or ``auto`` (JSON when the content type says
        so or the inflated body starts with ``{``; a GraphDef otherwise).
    name : the graph's name; overrides the JSON's and names a GraphDef.
    content_type : the request's Content-Type header.
    max_inflated, max_ops : limits (see `service.core.config.Settings`).

    Returns
    -------
    (graph, source) : the graph and how it arrived (``json``, ``json+gzip``, ``graphdef``,
        ``graphdef-text``).

    Raises
    ------
    PayloadTooLarge, PlacerError
    """
    if not body:
        raise PlacerError("upload: the request body is empty; send a graph (JSON or GraphDef)")
    gzipped = body[:2] == _GZIP_MAGIC
    if _says_gzip(content_type) and not gzipped:
        # else it would reach the GraphDef parser (TensorFlow: seconds) and be called a corrupt GraphDef
        raise PlacerError(f"upload: Content-Type is {content_type.split(';')[0].strip()} but the body is not "
                          "gzip data (it does not start with the gzip magic bytes 1f 8b)")
    raw = inflate(body, max_inflated)
    if fmt == "auto":
        is_json = "json" in content_type.lower() or raw.lstrip()[:1] == b"{"
        fmt = "json" if is_json else "graphdef"
    if fmt == "json":
        return _graph_from_json(raw, name, max_ops), "json+gzip" if gzipped else "json"
    return _graph_from_graphdef(raw, name or "graph", max_ops)


def _says_gzip(content_type: str) -> bool:
    """True for ``application/gzip`` and ``application/x-gzip`` (parameters ignored)."""
    return content_type.split(";")[0].strip().lower() in ("application/gzip", "application/x-gzip")


def _graph_from_json(raw: bytes, name: str | None, max_ops: int) -> OpGraph:
    from placer.graph_io import parse_json_bytes

    data = parse_json_bytes(raw, "upload")
    check_op_count(data, max_ops)
    if name and isinstance(data, dict):
        data = {**data, "name": name}
    return OpGraph.from_dict(data)


def _graph_from_graphdef(raw: bytes, name: str, max_ops: int) -> tuple[OpGraph, str]:
    """A binary or text GraphDef through the importer (TensorFlow loads here, on first use)."""
    from placer import importers

    text = importers.FORMATS["pbtxt"].sniff(raw, None)
    graph = importers.import_bytes(raw, name, "pbtxt" if text else "graphdef")
    if len(graph) > max_ops:
        raise PayloadTooLarge(f"graph: has {len(graph)} ops; this service accepts at most {max_ops} (max_ops)")
    return graph, "graphdef-text" if text else "graphdef"
