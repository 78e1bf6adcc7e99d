"""Running the application with uvicorn: in the foreground (the CLI) or in a background thread."""

from __future__ import annotations

import errno
import logging
import socket
import threading
import time
from types import TracebackType

import uvicorn
from fastapi import FastAPI

from textorch.errors import ConfigError
from textorch.serve.config import ServerConfig
from textorch.serve.deadlines import protocol_with_header_deadline

logger = logging.getLogger(__name__)


def _uvicorn_config(app: FastAPI, config: ServerConfig, log_level: str) -> uvicorn.Config:
    # One event loop in one process: batching needs every request to reach the same queue.
    return uvicorn.Config(app, host=config.host, port=config.port, log_level=log_level,
                          access_log=config.access_log, workers=1, lifespan="on",
                          http=protocol_with_header_deadline(config.client_timeout_s))


def listening_socket(config: ServerConfig) -> socket.socket:
    """The server's socket, bound to ``host:port`` before the models are loaded: a port in use
    (another server, an earlier one not yet stopped) or a host not of this machine is a
    ``ConfigError`` naming them, said before anything says "serving". uvicorn would bind later,
    log the error and exit with 3, after the models' loading and the "serving" line."""
    family = socket.AF_INET6 if ":" in config.host else socket.AF_INET  # as uvicorn's Config.bind_socket
    sock = socket.socket(family=family, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((config.host, config.port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"--host {config.host} --port {config.port}: cannot listen there "
                          f"({exc.strerror or exc}); is another server on that port?"
                          if exc.errno == errno.EADDRINUSE else
                          f"--host {config.host} --port {config.port}: cannot listen there ({exc.strerror or exc})") from None
    sock.set_inheritable(True)
    return sock


def serve_forever(app: FastAPI, config: ServerConfig, log_level: str = "info",
                  sock: socket.socket | None = None) -> None:
    """Serve until interrupted (Ctrl-C or SIGTERM stop it gracefully), on ``sock`` when given
    (see :func:`listening_socket`)."""
    uvicorn.Server(_uvicorn_config(app, config, log_level)).run(sockets=[sock] if sock is not None else None)


class BackgroundServer:
    """A uvicorn server in a daemon thread, for notebooks, tests and benchmarks.

    ``port=0`` in the config takes a free port; :attr:`url` gives the address once started.
    """

    def __init__(self, app: FastAPI, config: ServerConfig, log_level: str = "warning", start_timeout_s: float = 30.0) -> None:
        self._server = uvicorn.Server(_uvicorn_config(app, config, log_level))
        self._thread = threading.Thread(target=self._server.run, name="textorch-server", daemon=True)
        self._start_timeout_s = start_timeout_s
        self.url = ""

    def start(self) -> "BackgroundServer":
        self._thread.start()
        deadline = time.monotonic() + self._start_timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the HTTP server did not start (port in use?)")
            time.sleep(0.01)
        host, port = self._server.servers[0].sockets[0].getsockname()[:2]
        self.url = f"http://{host}:{port}"
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)

    def __enter__(self) -> "BackgroundServer":
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
