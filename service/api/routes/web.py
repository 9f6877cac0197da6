"""``/``: the web page, and ``/web/<asset>``: its script and style, all served from this package.

The page is plain HTML with one script and one style sheet, no framework and
nothing fetched from elsewhere (the Content-Security-Policy says so to the
browser). It talks to the same ``/v1`` API as any client, with the API key
the user types in.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, HTTPException, Response, status

router = APIRouter(include_in_schema=False)

WEB_DIR = Path(__file__).resolve().parents[2] / "web"
ASSETS = {
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
SECURITY_HEADERS = {
    # Only this origin: no CDN, no inline script, nothing sent elsewhere.
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; object-src 'none'; "
                               "base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}


@router.api_route("/", methods=["GET", "HEAD"])
def index() -> Response:
    """The page."""
    return Response((WEB_DIR / "index.html").read_bytes(), media_type="text/html; charset=utf-8",
                    headers=SECURITY_HEADERS)


@router.api_route("/web/{name}", methods=["GET", "HEAD"])
def asset(name: str) -> Response:
    """One of the page's files (a fixed list: no path from the request reaches the file system)."""
    if name not in ASSETS:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no asset {name!r}")
    return Response((WEB_DIR / name).read_bytes(), media_type=ASSETS[name], headers=SECURITY_HEADERS)
