"""``/docs``: the interactive API reference, served from this package with no CDN.

FastAPI's own ``/docs`` page loads Swagger UI from a CDN, which a machine
without internet access cannot reach (nothing but loopback is assumed at run
time). The same page is served here with the Swagger UI files of the
``swagger-ui-bundle-v2`` wheel, mounted at ``/docs/assets``.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = "/docs/assets"


def mount(app: FastAPI) -> None:
    """Add ``/docs`` and its assets to `app` (created with ``docs_url=None, redoc_url=None``)."""
    from swagger_ui_bundle import swagger_ui_path

    app.mount(ASSETS, StaticFiles(directory=str(swagger_ui_path)), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url=app.openapi_url, title=f"{app.title} API",
                                   swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{ASSETS}/swagger-ui.css",
                                   swagger_favicon_url=f"{ASSETS}/favicon-32x32.png")
