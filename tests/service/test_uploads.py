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
