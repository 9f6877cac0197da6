"""Upload parsing: gzip ceilings and format detection."""

from __future__ import annotations

import gzip
import json

import pytest

from placer.errors import PlacerError
from service.uploads import PayloadTooLarge, graph_from_upload, inflate
from tests.service.conftest import tiny_graph


def test_inflate_plain_passes_through():
    assert inflate(b"{}", 10) == b"{}"


def test_inflate_ceiling():
    data = gzip.compress(b"x" * 1000)
    assert inflate(data, 1000) == b"x" * 1000
    with pytest.raises(PayloadTooLarge):
        inflate(data, 999)


def test_inflate_corrupt():
    with pytest.raises(PlacerError, match="gzip"):
        inflate(b"\x1f\x8b\x08\x00garbage", 100)


def test_json_detected_without_content_type():
    graph, source = graph_from_upload(json.dumps(tiny_graph()).encode(), fmt="auto", name=None, content_type="",
                                      max_inflated=10**6, max_ops=10)
    assert source == "json" and len(graph) == 3


@pytest.mark.parametrize("content_type", ["application/gzip", "application/x-gzip; charset=binary"])
def test_gzip_content_type_with_a_body_that_is_not_gzip(content_type, monkeypatch):
    """The error says the body is not gzip, before the GraphDef parser (TensorFlow) is reached."""
    import service.uploads

    def no_graphdef(*args, **kwargs):
        raise AssertionError("parsed as a GraphDef")

    monkeypatch.setattr(service.uploads, "_graph_from_graphdef", no_graphdef)
    with pytest.raises(PlacerError, match="not gzip data"):
        graph_from_upload(b"hello, not gzip", fmt="auto", name=None, content_type=content_type,
                          max_inflated=10**6, max_ops=10)


@pytest.mark.parametrize("fmt", ["auto", "json", "graphdef"])
def test_gzip_inside_gzip_is_refused(fmt):
    """A gzip body whose content is gzip again is refused: the inner layer would be inflated with no ceiling."""
    inner = gzip.compress(b"{" + b" " * 2_000_000 + b"}")  # 2 MB inflated, over the 100 kB ceiling below
    body = gzip.compress(inner)
    assert len(body) < 1000
    with pytest.raises(PlacerError, match="gzip inside gzip"):
        graph_from_upload(body, fmt=fmt, name=None, content_type="application/gzip",
                          max_inflated=100_000, max_ops=10)


def test_uploads_parse_two_at_a_time(monkeypatch):
    """Parsing a graph takes many times its size in memory: at most two uploads are parsed at once, however
    many requests arrive together (the others wait)."""
    import threading
    import time

    import service.uploads

    running, most = 0, 0
    lock = threading.Lock()

    def slow_parse(raw, name, max_ops):
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.2)
        with lock:
            running -= 1
        return "graph"

    monkeypatch.setattr(service.uploads, "_graph_from_json", slow_parse)
    threads = [threading.Thread(target=graph_from_upload, args=(b"{}",),
                                kwargs=dict(fmt="json", name=None, content_type="", max_inflated=100, max_ops=10))
               for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most == 2
