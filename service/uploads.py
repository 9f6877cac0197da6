"""Turn an uploaded body into a validated `OpGraph`, within the size limits.

These arrive on ``POST /v1/graphs``: our JSON graph format (plain or gzip), a
binary TensorFlow GraphDef, a text GraphDef, a zipped SavedModel folder and a
``.keras`` file (both zip archives, checked by `service.archives`). Gzip is
inflated here with a ceiling (a few KiB of gzip can inflate to gigabytes), and
so is a zip; the op count is checked before the expensive validation. A
model is imported in a child process (TensorFlow reads it there, not in the
service): see `_import_in_child`.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import zlib
from pathlib import Path
from typing import Any, Literal

from placer.errors import InputShapeError, PlacerError
from placer.graph import OpGraph
from service import archives
from service.core.config import limit_named
from service.storage import GraphRecord

log = logging.getLogger("placer.service")

UploadFormat = Literal["auto", "json", "graphdef", "saved_model", "keras"]
ARCHIVE_FORMATS = ("saved_model", "keras")
_GZIP_MAGIC = b"\x1f\x8b"
GRAPHDEF_SECONDS = 600.0
"""Longest one GraphDef import may run (parse, function inlining, shape inference) before it is killed."""
_PARSE_SLOTS = threading.BoundedSemaphore(2)
"""Uploads parsed at once; the others wait. Parsing takes many times the body's size in memory (JSON up to
~27x, a GraphDef a process with TensorFlow loaded): 40 requests at once (the thread pool) could take it
all, and with one interpreter lock more at once would not parse faster."""
_REFUSED = 3
"""Exit code of the import process when the GraphDef is bad input (its message on stdout)."""


class PayloadTooLarge(Exception):
    """A body, an inflated body or a graph is over a configured limit (HTTP 413)."""


def inflate(data: bytes, limit: int, where: str = "upload") -> bytes:
    """Gunzip `data` when it is gzip, refusing to produce more than `limit` bytes.

    Raises
    ------
    PayloadTooLarge
        If the inflated data would exceed `limit` bytes.
    PlacerError
        If the gzip stream is corrupt or truncated, or inflates to gzip again.
    """
    if data[:2] != _GZIP_MAGIC:
        return data
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(data, limit + 1)
    except zlib.error as e:
        raise PlacerError(f"{where}: corrupt gzip data ({e})") from None
    if len(out) > limit:
        raise PayloadTooLarge(f"{where}: inflates to more than {limit} bytes {limit_named('max_inflated_bytes')}")
    if not d.eof:
        raise PlacerError(f"{where}: truncated gzip data")
    if out[:2] == _GZIP_MAGIC:
        # The parsers gunzip again, with no ceiling (placer.fileio.gunzip): a few hundred bytes of gzip
        # inside gzip inflated to gigabytes past max_inflated_bytes. No graph format starts with these bytes.
        raise PlacerError(f"{where}: gzip inside gzip; compress the graph once")
    return out


def check_op_count(data: Any, max_ops: int, where: str = "graph") -> None:
    """Refuse a graph dict with more than `max_ops` nodes before validating it."""
    nodes = data.get("nodes") if isinstance(data, dict) else None
    if isinstance(nodes, list) and len(nodes) > max_ops:
        raise PayloadTooLarge(f"{where}: has {len(nodes)} ops; this service accepts at most {max_ops} "
                              f"{limit_named('max_ops')}")


def graph_from_upload(body: bytes, *, fmt: UploadFormat, name: str | None, content_type: str,
                      max_inflated: int, max_ops: int, fetches: list[str] | None = None,
                      batch: int | None = None, signature: str | None = None, loss: str | None = None,
                      optimizer: str | None = None, unknown_dim: int | None = None) -> tuple[OpGraph, str]:
    """Parse and validate an uploaded graph.

    Parameters
    ----------
    body : the request body as sent.
    fmt : ``json``, ``graphdef``, ``saved_model`` (a zipped SavedModel folder), ``keras`` (a ``.keras``
        file) or ``auto`` (a zip archive by what it holds; JSON when the content type says so or the
        inflated body starts with ``{``; a GraphDef otherwise).
    name : the graph's name; overrides the JSON's and names a GraphDef.
    content_type : the request's Content-Type header.
    max_inflated, max_ops : limits (see `service.core.config.Settings`).
    fetches : GraphDef only: the nodes one step runs; the nodes none of them needs (variable initializers
        too) are left out, as a session leaves them out of a step (`placer.importers.graphdef`).
    batch : GraphDef and SavedModel: fills the unknown first dimension of every placeholder (``placer import
        --batch``); a ``.keras`` file's training step: its batch size (required).
    signature : SavedModel only: the signature to import (default ``serving_default``).
    loss, optimizer : ``.keras`` only: the training step's, when not those the model was compiled with.
    unknown_dim : GraphDef and SavedModel: the estimate for dimensions no input fixes (``placer import
        --unknown-dim``), recorded in the graph's meta.

    Returns
    -------
    (graph, source) : the graph and how it arrived (``json``, ``json+gzip``, ``graphdef``,
        ``graphdef-text``, ``saved_model``, ``keras``).

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
    with _PARSE_SLOTS:
        raw = inflate(body, max_inflated)
        expected = None if fmt == "auto" else fmt  # a zip's contents tell a SavedModel from a .keras file
        if fmt == "auto" and archives.is_zip(raw):
            fmt = "saved_model"
        elif fmt == "auto":
            is_json = "json" in content_type.lower() or raw.lstrip()[:1] == b"{"
            fmt = "json" if is_json else "graphdef"
        saved_options = {k: v for k, v in (("signature", signature), ("loss", loss), ("optimizer", optimizer)) if v}
        estimate = {"unknown_dim": unknown_dim} if unknown_dim else {}
        if fmt in ARCHIVE_FORMATS:
            if fetches:
                raise PlacerError("upload: fetch applies to a GraphDef upload; a SavedModel or .keras file says "
                                  "what its step runs")
            return _graph_from_archive(raw, name, max_ops, max_inflated, expected, {
                **saved_options, **estimate, **({"batch_size": batch} if batch else {})})
        if saved_options:
            raise PlacerError(f"upload: {', '.join(saved_options)} appl{'ies' if len(saved_options) == 1 else 'y'}"
                              " to a zipped SavedModel or a .keras file")
        if fmt == "json":
            given = [n for n, v in (("fetch", fetches), ("batch", batch), ("unknown_dim", unknown_dim)) if v]
            if given:
                what = ("a GraphDef upload" if given == ["fetch"] else
                        "an upload of a model (GraphDef, SavedModel or .keras file)")
                raise PlacerError(f"upload: {' and '.join(given)} appl{'y' if len(given) > 1 else 'ies'} to "
                                  f"{what}; a JSON graph is stored as sent")
            return _graph_from_json(raw, name, max_ops), "json+gzip" if gzipped else "json"
        options = {k: v for k, v in (("fetches", fetches), ("batch_size", batch)) if v} | estimate
        return _graph_from_graphdef(raw, name or "graph", max_ops, options)


def upload_record(body: bytes, *, owner: str | None, keep_graph: bool, **options: Any
                  ) -> tuple[GraphRecord, OpGraph | None]:
    """`graph_from_upload`, then the record to store for `owner` (gzip JSON): run by
    `service.bodies.BodyParser`, in a parse process for a large body, so the service only stores bytes.

    Returns
    -------
    (record, graph) : `graph` only with `keep_graph` (a graph sent back from a process would be pickled).
    """
    from service.graph_store import graph_record

    graph, source = graph_from_upload(body, **options)
    return graph_record(graph, source, owner), graph if keep_graph else None


def _says_gzip(content_type: str) -> bool:
    """True for ``application/gzip`` and ``application/x-gzip`` (parameters ignored)."""
    return content_type.split(";")[0].strip().lower() in ("application/gzip", "application/x-gzip")


def _graph_from_json(raw: bytes, name: str | None, max_ops: int) -> OpGraph:
    from placer.fileio import parse_json_bytes

    data = parse_json_bytes(raw, "upload")  # lone surrogates refused there
    check_op_count(data, max_ops)
    if name and isinstance(data, dict):
        data = {**data, "name": name}
    return OpGraph.from_dict(data)


def _graph_from_graphdef(raw: bytes, name: str, max_ops: int,
                         options: dict[str, Any] | None = None) -> tuple[OpGraph, str]:
    """A binary or text GraphDef through the importer, run in a child process (`_import_in_child`).

    The upload reaches TensorFlow's C++ code (protobuf parser, grappler's function inliner, shape
    inference), which aborts or segfaults on some malformed graphs: in the service's own process a
    50-byte GraphDef whose function calls itself took the whole service down (SIGSEGV). In a child, a
    crash or a hang fails that upload alone (a 422), and a slow one is killed after `GRAPHDEF_SECONDS`.
    `options` (``fetches``, ``batch_size``) reach it as a JSON line before the GraphDef on its stdin, not as
    arguments (one holds at most 128 KiB).

    Raises
    ------
    PayloadTooLarge
        Over `max_ops`.
    PlacerError
        Not a GraphDef TensorFlow can import, or the import crashed or ran out of time.
    """
    return _import_in_child(raw, name, max_ops, options or {}, "GraphDef")


def _graph_from_archive(raw: bytes, name: str | None, max_ops: int, max_inflated: int, expected: str | None,
                        options: dict[str, Any]) -> tuple[OpGraph, str]:
    """A zipped SavedModel folder or a ``.keras`` file: checked (`service.archives`), written to a temporary
    folder, and imported in a child process (`_import_in_child`) as ``placer import`` imports it.

    Raises
    ------
    PayloadTooLarge
        If the archive inflates past `max_inflated`, or the graph has more than `max_ops` ops.
    PlacerError
        A bad archive (`service.archives`), not of the `expected` kind (when given), an option that does
        not apply to it, or a model TensorFlow or Keras cannot load.
    """
    import tempfile

    try:
        members = archives.checked_members(raw, max_inflated)
        kind, folder = archives.kind_of(members)
        if expected is not None and kind != expected:
            raise PlacerError(f"upload: format={expected} but the archive holds a "
                              f"{'SavedModel' if kind == 'saved_model' else '.keras file'}")
        wrong = [k for k in (("loss", "optimizer") if kind == "saved_model" else ("signature", "unknown_dim"))
                 if k in options]
        if wrong:
            raise PlacerError(f"upload: {', '.join(wrong)} do{'es' if len(wrong) == 1 else ''} not apply to a "
                              f"{'SavedModel' if kind == 'saved_model' else '.keras file'}")
        if kind == "keras" and "batch_size" not in options:
            raise PlacerError("upload: a .keras file's training step needs its batch size (?batch=B)")
        with tempfile.TemporaryDirectory(prefix="placer-upload-") as tmp:
            if kind == "keras":
                path = Path(tmp) / "model.keras"  # Keras reads the archive itself, within its declared sizes
                path.write_bytes(raw)
            else:
                archives.extract(raw, members, Path(tmp), max_inflated)
                path = Path(tmp) / folder
            return _import_in_child(b"", name or "graph", max_ops, {**options, kind: str(path)}, "model")
    except archives.ArchiveTooLarge as e:
        raise PayloadTooLarge(str(e)) from None


def _import_in_child(raw: bytes, name: str, max_ops: int, options: dict[str, Any], what: str
                     ) -> tuple[OpGraph, str]:
    """Run the importer in a child process (`_import_child`): `options` as a JSON line, then `raw` on its
    stdin; a crash, a hang past `GRAPHDEF_SECONDS` or bad input fails this upload alone.

    Raises
    ------
    PayloadTooLarge
        Over `max_ops`.
    PlacerError
        Bad input (the child's one-line message), or the import crashed or ran out of time.
    """
    root = str(Path(__file__).resolve().parents[1])  # where `service` is importable from, installed or not
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
           "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    try:
        proc = subprocess.run([sys.executable, "-m", "service.uploads"],
                              input=json.dumps(options).encode() + b"\n" + raw,
                              capture_output=True, timeout=GRAPHDEF_SECONDS, env=env)
    except subprocess.TimeoutExpired:
        raise PlacerError(f"upload: importing the {what} took over {GRAPHDEF_SECONDS:g} s; "
                          "import it with 'placer import' and upload the JSON graph") from None
    if proc.returncode == _REFUSED:
        raise PlacerError(proc.stdout.decode(errors="replace").strip() or f"upload: not an importable {what}")
    if proc.returncode < 0:
        sig = signal.Signals(-proc.returncode).name
        log.warning("%s import process ended by %s: %s", what, sig, _tail(proc.stderr))
        raise PlacerError(f"upload: TensorFlow crashed importing this {what} ({sig}); it is malformed")
    if proc.returncode != 0:
        log.error("%s import process exited with code %d: %s", what, proc.returncode, _tail(proc.stderr))
        raise RuntimeError(f"{what} import process exited with code {proc.returncode}")
    answer = json.loads(proc.stdout)
    data = {**answer["graph"], "name": name}
    check_op_count(data, max_ops)
    return OpGraph.from_dict(data), answer["source"]


def _tail(stderr: bytes, chars: int = 2000) -> str:
    return stderr.decode(errors="replace")[-chars:].strip()


_QUERY_PARAMS = {"--signature NAME": "?signature=NAME", "--batch": "?batch=B", "--loss": "?loss=",
                 "--optimizer": "?optimizer=", "--unknown-dim N": "?unknown_dim=N"}
"""The importer's messages name `placer import`'s flags; an upload gives these query parameters instead."""


def _import_child() -> int:
    """``python -m service.uploads``: on stdin a line of options, then a GraphDef; ``{"graph", "source"}``
    JSON on stdout.

    The options are a JSON object: ``fetches`` prunes the graph to what they need (a session's rule),
    ``batch_size`` fills unknown batch dimensions, ``unknown_dim`` estimates data-dependent ones; without
    ``fetches``, a `tf.function`'s outputs are found (`placer.importers.fetches`). With ``saved_model`` (a
    folder) or ``keras`` (a file) that model is imported instead (`placer.importers.saved_models`;
    ``signature``, ``loss``, ``optimizer``), and stdin holds nothing after the options.

    Bad input exits with `_REFUSED` and its one-line message on stdout. Anything TensorFlow itself
    prints goes to stderr: stdout is kept for the answer.
    """
    from placer import importers
    from placer.importers.graphdef import from_graphdef_bytes, from_graphdef_text

    answer = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    header, _, raw = sys.stdin.buffer.read().partition(b"\n")
    options = json.loads(header)
    source = None
    try:
        text = importers.FORMATS["pbtxt"].sniff(raw, None)
        if "saved_model" in options:
            from placer.importers.saved_models import from_saved_model

            source = "saved_model"
            graph = from_saved_model(options["saved_model"], "graph", signature=options.get("signature"),
                                     batch_size=options.get("batch_size"), unknown_dim=options.get("unknown_dim"))
        elif "keras" in options:
            from placer.importers.saved_models import from_keras_file

            source = "keras"
            graph = from_keras_file(options["keras"], options["batch_size"], "graph", loss=options.get("loss"),
                                    optimizer=options.get("optimizer"))
        else:
            load = from_graphdef_text if text else from_graphdef_bytes
            # a bare GraphDef's fetches are a session's; without them, a tf.function's outputs are found
            graph = load(raw, "graph", **options,
                         **({"session": True} if "fetches" in options else {"find_fetches": True}))
    except InputShapeError as e:  # its hint names the library's and the CLI's options, which an upload lacks
        hint = ("give the batch size (?batch=B), or import it with 'placer import --input-shape NODE=D1,D2,...' "
                "and upload the JSON graph" if "batch_size" not in options else
                "import it with 'placer import --input-shape NODE=D1,D2,...' and upload the JSON graph")
        answer.write(f"upload: {e.problem or e}; {hint}")
        answer.close()
        return _REFUSED
    except PlacerError as e:
        message = str(e)
        if source is not None:  # the messages name the service's temporary folder, which is no user's
            local = options[source]
            message = "upload: " + message.replace(repr(local), "the archive").replace(local, "the archive")
        for flag, param in _QUERY_PARAMS.items():
            message = message.replace(flag, param)
        answer.write(message)
        answer.close()
        return _REFUSED
    json.dump({"graph": graph.to_dict(), "source": source or ("graphdef-text" if text else "graphdef")}, answer)
    answer.close()
    return 0


if __name__ == "__main__":
    sys.exit(_import_child())
