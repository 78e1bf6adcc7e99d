"""HTTP serving of trained models (FastAPI + uvicorn), with requests gathered into batches.

``textorch serve`` is the command; :func:`create_app` builds the application from loaded
models, so it can also be mounted in another ASGI program or started in a thread
(:class:`~textorch.serve.runner.BackgroundServer`).
"""

from __future__ import annotations

from textorch.serve.config import ServerConfig

__all__ = ["ServerConfig"]
