"""Server settings; every default lives here and the ``serve`` command's options are built from them."""

from __future__ import annotations

from dataclasses import dataclass

from textorch.errors import ConfigError


@dataclass(frozen=True)
class ServerConfig:
    """Where to listen and how requests are batched and bounded."""

    host: str = "127.0.0.1"
    """Interface to bind; the loopback default keeps a model private to the machine."""
    port: int = 8080
    batch_window_ms: float = 5.0
    """How long the first request of a batch waits for others while requests overlap (a request that
    finds the model idle runs at once; 0: no batching, one request per forward pass)."""
    max_batch_size: int = 64
    """Sequences per batch: a batch closes early when it reaches this many."""
    max_request_bytes: int = 1_048_576
    """Larger request bodies are refused with 413."""
    access_log: bool = False
    """uvicorn's per-request log lines (off: they cost throughput under load)."""
    client_timeout_s: float = 30.0
    """Seconds a client has to send a request's headers, and then its body: slower connections are
    closed (headers) or answered 408 (body), so slow clients cannot hold connections for ever."""

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"--port must be in 0-65535, got {self.port}")
        if not 0 <= self.batch_window_ms <= 10_000:
            raise ConfigError(f"--batch-window-ms must be in [0, 10000], got {self.batch_window_ms}")
        if self.max_batch_size < 1:
            raise ConfigError(f"--max-batch-size must be >= 1, got {self.max_batch_size}")
        if self.max_request_bytes < 1024:
            raise ConfigError(f"--max-request-bytes must be >= 1024, got {self.max_request_bytes}")
        if not 0 < self.client_timeout_s <= 3600:
            raise ConfigError(f"--client-timeout must be in (0, 3600] seconds, got {self.client_timeout_s}")

    @property
    def batch_window_s(self) -> float:
        return self.batch_window_ms / 1000.0
