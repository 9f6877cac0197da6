"""``/docs`` works offline: the page and every file it loads come from this service."""

from __future__ import annotations

import re


def test_docs_page_loads_only_local_assets(client):
    r = client.get("/docs")
    assert r.status_code == 200 and "text/html" in r.headers["content-type"]
    urls = re.findall(r'(?:src|href)="([^"]+)"', r.text)
    assert urls and not [u for u in urls if "://" in u], urls  # no CDN
    for url in urls:
        asset = client.get(url)
        assert asset.status_code == 200, url
        assert len(asset.content) > 100, url
    assert "/openapi.json" in r.text
    assert client.get("/openapi.json").status_code == 200


def test_redoc_is_not_offered(client):
    assert client.get("/redoc").status_code == 404
