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
