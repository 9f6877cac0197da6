"""The REST service: a thin FastAPI shell over the `placer` library.

It parses, validates, calls the library, stores and answers; it adds no
placement logic. Start it with ``placer serve``; the app factory is
`service.main.create_app`.
"""
