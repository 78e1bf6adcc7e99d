"""``textorch serve``: load models, then serve them over HTTP (a few lines over ``textorch.serve``)."""

from __future__ import annotations

import argparse
import logging

from textorch.cli.commands import group_help
from textorch.cli.export import add_engine_options, engine_options
from textorch.serve.config import ServerConfig

logger = logging.getLogger(__name__)


def _serve(args: argparse.Namespace) -> int:
    from textorch.serve.app import create_app
    from textorch.serve.models import load_models
    from textorch.serve.runner import listening_socket, serve_forever
    from textorch.train.dist import DistContext, resolve_device
    from textorch.tagging.tag_files import set_threads

    config = ServerConfig(
        host=args.host, port=args.port, batch_window_ms=args.batch_window_ms, max_batch_size=args.max_batch_size,
        max_request_bytes=args.max_request_bytes, access_log=args.access_log, client_timeout_s=args.client_timeout,
    )
    set_threads(args.threads)
    sock = listening_socket(config)  # a port in use is said first, not after loading and "serving"
    try:
        options = engine_options(args)
        options.check()  # before a device is taken
        device = resolve_device(options.session_device(), DistContext())
        models = load_models(args.model, device, args.cache_dir, engine=args.engine, quantized=args.quantized,
                             threads=args.threads, precision=args.precision)
        logger.info("serving %s on http://%s:%d (batch window %g ms, max batch %d)", ", ".join(models), config.host,
                    sock.getsockname()[1], config.batch_window_ms, config.max_batch_size)
        serve_forever(create_app(models, config), config, log_level="debug" if args.verbose else "info", sock=sock)
    finally:
        sock.close()
    return 0


def register(groups: argparse._SubParsersAction) -> None:
    d = ServerConfig()
    p = groups.add_parser(
        "serve", help=group_help("serve"),
        description="Serve one or more model directories over HTTP. Endpoints: POST /models/NAME/tag, "
                    "POST /models/NAME/classify, GET /models, GET /health, GET /docs (OpenAPI).",
    )
    p.add_argument("--model", action="append", required=True, metavar="[NAME=]DIR",
                   help="model directory to serve, named after the directory unless NAME= is given (repeatable)")
    p.add_argument("--host", default=d.host, help=f"interface to bind (default: {d.host}, this machine only)")
    p.add_argument("--port", type=int, default=d.port, help=f"port (default: {d.port})")
    p.add_argument("--batch-window-ms", type=float, default=d.batch_window_ms,
                   help=f"how long a request waits for others to share its batch while requests overlap (a request that finds the model idle runs at once); 0 turns batching off (default: {d.batch_window_ms:g})")
    p.add_argument("--max-batch-size", type=int, default=d.max_batch_size,
                   help=f"sequences per batch at most (default: {d.max_batch_size})")
    p.add_argument("--max-request-bytes", type=int, default=d.max_request_bytes,
                   help=f"larger request bodies get 413 (default: {d.max_request_bytes})")
    p.add_argument("--client-timeout", type=float, default=d.client_timeout_s, metavar="SECONDS",
                   help=f"time a client has to send a request's headers, then its body; slower ones are dropped "
                        f"(default: {d.client_timeout_s:g})")
    p.add_argument("--access-log", action="store_true", help="log every request (off by default: it costs throughput)")
    p.add_argument("--device", default="auto", choices=["cpu", "cuda", "auto"],
                        help="compute device; auto: a GPU when one is visible, else the CPU (default: auto)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads for torch or ONNX Runtime (default: their choice)")
    add_engine_options(p, with_onnx_dir=False)
    p.add_argument("--cache-dir", default=None, help="textorch's cache root, holding embeddings/ and delft-imports/ "
                        "(default: $TEXTORCH_CACHE_DIR, else ~/.cache/textorch)")
    p.set_defaults(run=_serve, handles_sigterm=True)  # uvicorn stops gracefully on SIGTERM
