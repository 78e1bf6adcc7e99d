"""A deadline for request headers: connections of clients too slow to send them are closed.

uvicorn waits for the headers of a connection's first request without limit (its keep-alive
timeout only runs between requests, and stops at the first byte of the next one), so clients
that connect and then send nothing, or a byte now and then (slowloris), each hold a connection
and a file descriptor for as long as they like; enough of them and the server accepts no one
else. This protocol closes a connection whose request headers are not complete within the
deadline. Once the headers are in, the request body has its own deadline
(:class:`~textorch.serve.limits.BodySizeLimit`, answered with 408), and the time the model
takes is never limited.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

logger = logging.getLogger(__name__)


class HeaderDeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol plus a deadline on every request's headers (``header_timeout_s``)."""

    header_timeout_s: float = 30.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        started = self.cycle
        super().handle_events()
        if self.cycle is not started:  # a request's headers are complete: it is being served
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()  # the next request on this kept-alive connection has its own deadline

    def _arm(self) -> None:
        self._disarm()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_too_slow)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        waiting_for_headers = self.cycle is None or self.cycle.response_complete
        if waiting_for_headers and not self.transport.is_closing():
            logger.debug("closing a connection whose request headers took over %g s", self.header_timeout_s)
            # Written raw: h11 has no request to answer, but a client that does read learns why.
            self.transport.write(b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            self.transport.close()


def protocol_with_header_deadline(seconds: float) -> type[HeaderDeadlineProtocol]:
    """The protocol class to give uvicorn (``Config(http=...)``), with this deadline."""
    return type("HeaderDeadlineProtocol", (HeaderDeadlineProtocol,), {"header_timeout_s": seconds})
