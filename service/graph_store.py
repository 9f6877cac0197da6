"""Stored graphs as `OpGraph`s: compress on the way in, cache parsed ones on the way out.

Graphs are immutable once stored, so a parsed graph can be kept in memory
and shared by requests; parsing and validating a 10k-op graph costs far
more than the placement request that needs it.
"""

from __future__ import annotations

import gzip
import json
import secrets
import threading
import time
import logging
from collections import OrderedDict
from pathlib import Path

from placer.errors import PlacerError
from placer.graph import OpGraph
from placer.graph_io import load_graph
from service.storage import GraphRecord, Storage


log = logging.getLogger("placer.service")


def new_id(prefix: str) -> str:
    """A random id such as ``g_1f2e3d4c5b6a7988`` (the letter says what it names)."""
    return f"{prefix}_{secrets.token_hex(8)}"


def graph_record(graph: OpGraph, source: str, owner: str | None = None) -> GraphRecord:
    """A new graph record holding `graph` as gzip JSON (``mtime=0``: the same graph, the same bytes)."""
    data = gzip.compress(json.dumps(graph.to_dict(), separators=(",", ":")).encode(), 6, mtime=0)
    return GraphRecord(
        id=new_id("g"), name=graph.name, num_ops=len(graph), num_edges=graph.num_edges,
        source=source, created_at=time.time(), size_bytes=len(data), data=data, owner=owner,
    )


class GraphStore:
    """Adds graphs to storage and loads them back, with an LRU of parsed graphs."""

    def __init__(self, storage: Storage, cache_size: int = 16):
        self.storage = storage
        self.cache_size = cache_size
        self._cache: OrderedDict[str, OpGraph] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, graph: OpGraph, *, source: str, owner: str | None = None) -> GraphRecord:
        """Store `graph` (as gzip JSON) for `owner` and return its record."""
        record = graph_record(graph, source, owner)
        self.storage.add_graph(record=record)
        self._remember(record.id, graph)
        return record

    def add_record(self, record: GraphRecord, graph: OpGraph | None = None) -> GraphRecord:
        """Store a record made elsewhere (`graph_record`, maybe in a parse process); without its `graph`,
        the graph is parsed when first loaded."""
        self.storage.add_graph(record=record)
        if graph is not None:
            self._remember(record.id, graph)
        return record

    def add_bundled(self, folder: Path) -> list[GraphRecord]:
        """Store each ``*.json.gz`` graph of `folder` never stored before (source ``bundled:<file>``).

        "Never" includes graphs since deleted: a user's DELETE of a bundled
        graph lasts across restarts. Storage checks and stores in one
        transaction, so service workers starting together store each file
        once; files stored before are skipped before they are parsed. A file
        that fails to load is logged and skipped: a bad bundled file must not
        keep the service from starting.
        """
        stored = self.storage.bundled_sources()
        added = []
        for path in sorted(folder.glob("*.json.gz")):
            source = f"bundled:{path.name}"
            if source in stored:
                continue
            try:
                graph = load_graph(path)
            except PlacerError as e:
                log.warning("bundled graph %s skipped: %s", path, e)
                continue
            record = graph_record(graph, source)
            if self.storage.add_bundled_graph(record=record):  # False: another worker stored it first
                self._remember(record.id, graph)
                added.append(record)
        return added

    def load(self, graph_id: str, tenant: str | None = None) -> OpGraph | None:
        """The stored graph, or None when no graph `tenant` may read has that id (None: any graph)."""
        with self._lock:
            cached = self._cache.get(graph_id)
            if cached is not None:
                self._cache.move_to_end(graph_id)
        if cached is not None:
            # Another service process may have deleted it: a metadata lookup is cheap, parsing is not.
            if self.storage.get_graph(graph_id=graph_id, tenant=tenant) is not None:
                return cached
            if self.storage.get_graph(graph_id=graph_id) is None:  # deleted, maybe by another service process
                with self._lock:
                    self._cache.pop(graph_id, None)
            return None
        record = self.storage.get_graph(graph_id=graph_id, with_data=True, tenant=tenant)
        if record is None or record.data is None:
            return None
        graph = OpGraph.from_dict(json.loads(gzip.decompress(record.data)))
        self._remember(graph_id, graph)
        return graph

    def delete(self, graph_id: str, tenant: str | None = None) -> bool:
        """Delete a graph `tenant` owns (None: any); True if one was deleted."""
        deleted = self.storage.delete_graph(graph_id=graph_id, tenant=tenant)
        if deleted:
            with self._lock:
                self._cache.pop(graph_id, None)
        return deleted

    def _remember(self, graph_id: str, graph: OpGraph) -> None:
        if self.cache_size <= 0:
            return
        with self._lock:
            self._cache[graph_id] = graph
            self._cache.move_to_end(graph_id)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
