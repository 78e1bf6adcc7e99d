"""The FastAPI application: routes, error answers, request size limit, batchers per model.

Each route only decodes the request, hands the sequences to the model's batcher (which calls
``SequenceLabeler.predict``, the library's one inference path) and encodes the answer with the
Python API's own function. Bad input is always a 4xx with a message; a 5xx means a bug.
"""

from __future__ import annotations

import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from textorch import __version__
from textorch.tagging.answer import tagging_document
from textorch.tagging.inputs import to_sequences
from textorch.data.corpus import TokenSequence
from textorch.errors import TextorchError
from textorch.tagging.prediction import Prediction
from textorch.serve.batcher import BatchStats, MicroBatcher
from textorch.serve.classify import classification_runner, classify_answer
from textorch.serve.config import ServerConfig
from textorch.serve.limits import BodySizeLimit
from textorch.serve.models import CLASSIFIER, TAGGER, ServedModel
from textorch.serve.schemas import (
    ClassifyRequest,
    ClassifyResponse,
    ErrorResponse,
    HealthResponse,
    ModelsResponse,
    TagRequest,
    TagResponse,
)

logger = logging.getLogger(__name__)

_ERRORS = {
    404: {"model": ErrorResponse, "description": "No model of that name and kind."},
    413: {"model": ErrorResponse, "description": "Request body larger than --max-request-bytes."},
    422: {"model": ErrorResponse, "description": "Malformed payload (the message says where)."},
}
_KIND_WORDS = {TAGGER: "tagging", CLASSIFIER: "classification"}


class EchoJSONResponse(JSONResponse):
    """JSON for answers that echo the client's texts.

    A JSON string may hold a lone surrogate (``"\\ud800"``, from broken text extraction), and
    Python decodes it, but UTF-8 cannot encode it: such an answer is written with every
    non-ASCII character escaped, which is valid JSON that gives the client its text back.
    """

    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except UnicodeEncodeError:
            return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


def _tag_runner(model: ServedModel, config: ServerConfig) -> Callable[[list[TokenSequence]], list[Prediction]]:
    labeler = model.predictor

    def run(sequences: list[TokenSequence]) -> list[Prediction]:
        return labeler.predict(sequences, batch_size=config.max_batch_size)

    return run


def _batcher(model: ServedModel, executor: ThreadPoolExecutor, config: ServerConfig) -> MicroBatcher:
    run = _tag_runner(model, config) if model.kind == TAGGER else classification_runner(model, config)
    return MicroBatcher(run, executor, config.batch_window_s, config.max_batch_size)


def total_stats(batchers: dict[str, MicroBatcher]) -> dict[str, Any]:
    """Counters summed over models (maxima kept as maxima)."""
    total = BatchStats()
    for batcher in batchers.values():
        stats = batcher.stats
        total.batches += stats.batches
        total.requests += stats.requests
        total.sequences += stats.sequences
        total.compute_s += stats.compute_s
        total.max_requests_per_batch = max(total.max_requests_per_batch, stats.max_requests_per_batch)
        total.max_sequences_per_batch = max(total.max_sequences_per_batch, stats.max_sequences_per_batch)
    return total.to_json()


def create_app(models: dict[str, ServedModel], config: ServerConfig | None = None) -> FastAPI:
    """An application serving ``models``; batching starts and stops with the application."""
    config = config or ServerConfig()
    # One inference thread for all models: requests queue up instead of competing for the cores.
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="textorch-inference")
    batchers = {name: _batcher(model, executor, config) for name, model in models.items()}

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        for batcher in batchers.values():
            batcher.start()
        try:
            yield
        finally:
            for batcher in batchers.values():
                await batcher.stop()
            executor.shutdown(wait=False)

    app = FastAPI(
        title="textorch",
        version=__version__,
        description="Sequence labelling and text classification models; concurrent requests are batched.",
        lifespan=lifespan,
    )
    app.state.models = models
    app.state.batchers = batchers
    app.state.config = config
    app.add_middleware(BodySizeLimit, max_bytes=config.max_request_bytes, timeout_s=config.client_timeout_s)
    _add_error_handlers(app)

    def find(name: str, kind: str) -> ServedModel:
        model = models.get(name)
        if model is None or model.kind != kind:
            available = ", ".join(n for n, m in models.items() if m.kind == kind) or "none"
            raise HTTPException(404, f"no {_KIND_WORDS[kind]} model named {name!r} (available: {available})")
        return model

    @app.get("/health", response_model=HealthResponse)
    async def health() -> JSONResponse:
        """Liveness, the loaded models, and batching counters (batches larger than one request show it works)."""
        batching = {"window_ms": config.batch_window_ms, "max_batch_size": config.max_batch_size, **total_stats(batchers)}
        return JSONResponse({"status": "ok", "version": __version__, "models": list(models), "batching": batching})

    @app.get("/models", response_model=ModelsResponse)
    async def list_models() -> JSONResponse:
        """Name, kind, architecture, labels, device and engine of every model, with its batching counters."""
        described = [{**m.describe(), "batching": batchers[n].stats.to_json()} for n, m in models.items()]
        return JSONResponse({"models": described})

    @app.post("/models/{name}/tag", response_model=TagResponse, responses=_ERRORS)
    async def tag(name: str, body: TagRequest) -> JSONResponse:
        """Tag raw ``texts`` or pre-tokenised ``sequences``; the answer has DeLFT's JSON structure."""
        model = find(name, TAGGER)
        started = time.perf_counter()
        labeler = model.predictor
        where = "texts" if body.texts is not None else "sequences"
        sequences, pretokenised = to_sequences(
            getattr(body, where), labeler.n_features, bool(labeler.encoder.feature_columns), where
        )
        predictions = await batchers[name].submit(sequences)
        runtime = time.perf_counter() - started
        labels_as = labeler.input_format if pretokenised else None
        return EchoJSONResponse(tagging_document(name, sequences, predictions, runtime, labels_as))

    @app.post("/models/{name}/classify", response_model=ClassifyResponse, responses=_ERRORS)
    async def classify(name: str, body: ClassifyRequest) -> JSONResponse:
        """Class scores for each text, in DeLFT's classification JSON structure."""
        model = find(name, CLASSIFIER)
        started = time.perf_counter()
        results = await batchers[name].submit(body.texts)
        return EchoJSONResponse(classify_answer(model, body.texts, results, time.perf_counter() - started))

    return app


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def invalid_payload(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        content_type = request.headers.get("content-type", "")
        if "json" not in content_type:
            detail = f"send the body as JSON with Content-Type: application/json (got {content_type or 'none'!r})"
            return JSONResponse({"detail": detail}, status_code=415)
        if any(error.get("type") == "json_invalid" for error in errors):
            message = "; ".join(str(e.get("msg")) for e in errors)
            return JSONResponse({"detail": f"request body is not valid JSON ({message})"}, status_code=400)
        messages = []
        for error in errors[:5]:
            where = ".".join(str(part) for part in error.get("loc", ()) if part != "body")
            messages.append(f"{where or 'body'}: {error.get('msg')}")
        if len(errors) > 5:
            messages.append(f"... and {len(errors) - 5} more")
        brief = [{"loc": list(e.get("loc", ())), "msg": e.get("msg"), "type": e.get("type")} for e in errors[:20]]
        return JSONResponse({"detail": "; ".join(messages), "errors": brief}, status_code=422)

    @app.exception_handler(TextorchError)
    async def bad_input(request: Request, exc: TextorchError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=422)
