"""The HTTP protocol `placer serve` runs: uvicorn's h11 protocol, answering over-long headers with a 431.

h11 stops buffering a request's head at ``max_incomplete_event_size`` and
uvicorn then answers 400 "Invalid HTTP request received." and closes at
once: with the client still sending, the close became a connection reset,
so a client sending a long head got no answer at all. Here the limit is the service's
``max_header_bytes``, the answer a 431 naming it, and what the client still
sends is read and dropped for a moment before the connection closes, so
the client reads the answer. Heads that arrive in one read are measured by
`service.main.HeaderLimitMiddleware`.
"""

from __future__ import annotations

from uvicorn.protocols.http.h11_impl import DEFAULT_MAX_INCOMPLETE_EVENT_SIZE, H11Protocol

DRAIN_SECONDS = 2.0
"""How long the rest of an over-long request is read and dropped before the connection closes."""
TOO_LONG = b'{"detail":"request headers are over the limit (max_header_bytes)"}'


class HeaderLimitH11Protocol(H11Protocol):
    """`H11Protocol` with a 431 for a request head over h11's limit (see the module docstring)."""

    _draining = False

    def send_400_response(self, msg: str) -> None:
        limit = self.config.h11_max_incomplete_event_size or DEFAULT_MAX_INCOMPLETE_EVENT_SIZE
        if len(self.conn.trailing_data[0]) <= limit:  # another malformed request: uvicorn's 400
            super().send_400_response(msg)
            return
        # h11 is in its error state and sends nothing more: the answer is written by hand.
        self.transport.write(b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
                             b"connection: close\r\ncontent-length: " + str(len(TOO_LONG)).encode() +
                             b"\r\n\r\n" + TOO_LONG)
        self._draining = True
        self.loop.call_later(DRAIN_SECONDS, self.transport.close)

    def data_received(self, data: bytes) -> None:
        if self._draining:  # the rest of the refused request: dropped
            return
        super().data_received(data)
