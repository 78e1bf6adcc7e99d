"""One pass of tagging a whole file, as ``seq tag`` streams it, with each stage's CPU seconds.

The helper behind ``python -m benchmarks stages`` (not run on its own). A pass loads a fresh
tagger (:class:`~textorch.tagging.labeler.SequenceLabeler` for the PyTorch engine,
:class:`~textorch.tagging.onnx_tagger.OnnxTagger` for ONNX Runtime), then reads, tags and writes
the file chunk by chunk, the way the command does, with a clock around the functions each stage
runs. The clocks wrap those functions for the pass and put them back after it; nothing else
changes, so the pass writes the command's bytes, and the SHA-256 of that text is returned for
a check that timing changed no label.

Stages (:data:`STAGES`), CPU seconds of this process:

- ``parse``: reading the input into sequences (or, on the ONNX row route, into chunks of rows and
  their columns: what the pass spends outside tagging and writing);
- ``encode``: tokens to ids (``SequenceLabeler.encode``, ``SequenceEncoder.encode_call``);
- ``chars``: the character encoder over the call's token types (``EncodedData.token_vectors``;
  the ONNX export's ``char-encoder.onnx``);
- ``inputs``: the network's padded inputs per batch (``EncodedData.batch``; ``OnnxTagger._inputs``);
- ``network``: the network to emissions (``model.decode`` less the CRF; ``session.run``);
- ``crf``: decoding the emissions to labels (the compiled or reference CRF; the CRF arrays);
- ``predict_rest``: what else ``predict`` does (batch cuts, sorting, label names); under PyTorch
  a chunk of one sequence takes the one-sequence route, whose whole time falls here;
- ``write``: the tagged text in the input's layout.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from textorch.data.streams import chunks
from textorch.data.writers import conll_block, grobid_block
from textorch.tagging import row_tagging
from textorch.tagging.tag_files import ChunkSize, grobid_width, stream_for_tagging

STAGES = ("parse", "encode", "chars", "inputs", "network", "crf", "predict_rest", "write")
ENGINES = ("torch", "onnx")
ROUTES = ("rows", "sequences")
_MISSING = object()


class StageClock:
    """CPU seconds per clock name, added by wrappers around the functions a stage runs.

    ``active=False`` wraps nothing and times nothing: the same pass, unmeasured (for a profiler,
    which should not see the wrappers)."""

    def __init__(self, active: bool = True) -> None:
        self.active = active
        self.seconds: dict[str, float] = {}
        self._undo: list[tuple[object, str, object]] = []

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def wrap(self, owner: object, attribute: str, name: str) -> None:
        """Time every call of ``owner.attribute`` (an instance's method, a class's function or a
        module's function) under ``name`` until :meth:`restore`."""
        if not self.active:
            return
        original = getattr(owner, attribute)
        self._undo.append((owner, attribute, vars(owner).get(attribute, _MISSING)))
        add = self.add

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.process_time()
            try:
                return original(*args, **kwargs)
            finally:
                add(name, time.process_time() - started)

        setattr(owner, attribute, timed)  # on a class, a plain function: it binds ``self`` as the original did

    def restore(self) -> None:
        """Put back every wrapped function, the last wrapped first."""
        for owner, attribute, before in reversed(self._undo):
            if before is _MISSING:
                delattr(owner, attribute)
            else:
                setattr(owner, attribute, before)
        self._undo.clear()

    @contextmanager
    def timing(self, name: str) -> Iterator[None]:
        """Time the ``with`` block under ``name``."""
        started = time.process_time()
        try:
            yield
        finally:
            if self.active:
                self.add(name, time.process_time() - started)

    def iterate(self, items: Iterator, name: str) -> Iterator:
        """``items``, the CPU seconds of producing each added under ``name``."""
        while True:
            started = time.process_time()
            try:
                item = next(items)
            except StopIteration:
                return
            finally:
                if self.active:
                    self.add(name, time.process_time() - started)
            yield item


def one_pass(model: str, path: str, engine: str = "onnx", input_format: str = "grobid", batch_size: int = 32,
             quantized: bool = False, route: str = "rows", cache_dir: str | None = None, threads: int = 1,
             clock: StageClock | None = None) -> tuple[dict[str, float], str, int]:
    """CPU seconds of each stage over the whole file, one pass, a fresh tagger; the SHA-256 of
    the text it wrote; the file's tokens. ``route`` (ONNX engine, GROBID input): ``rows``, read,
    encoded and written as rows as ``seq tag`` does, or ``sequences``, by sequence objects (the
    PyTorch engine and CoNLL input always go by sequences). ``clock``: an inactive one for an
    unmeasured pass (the times then come back as zeros). ``threads``: ONNX Runtime's (PyTorch's
    are the process's, set by the caller)."""
    if engine not in ENGINES:
        raise ValueError(f"engine {engine!r}: one of {', '.join(ENGINES)}")
    clock = clock or StageClock()
    try:
        if engine == "torch":
            written, tokens = _torch_pass(model, path, input_format, batch_size, cache_dir, clock)
        else:
            written, tokens = _onnx_pass(model, path, input_format, batch_size, quantized, route, cache_dir,
                                        threads, clock)
    finally:
        clock.restore()
    return stage_seconds(clock.seconds, engine), written.hexdigest(), tokens


def stage_seconds(raw: dict[str, float], engine: str) -> dict[str, float]:
    """:data:`STAGES` from the clocks of a pass. Under PyTorch the CRF runs inside ``decode``
    (``network`` is ``decode`` less it); under both, ``predict_rest`` is ``predict`` less what
    was timed inside it."""
    get = raw.get
    times = {stage: get(stage, 0.0) for stage in STAGES}
    if engine == "torch":
        times["network"] = max(get("decode", 0.0) - times["crf"], 0.0)
        inside = get("encode", 0.0) + get("chars", 0.0) + get("inputs", 0.0) + get("decode", 0.0)
    else:
        inside = sum(times[stage] for stage in ("encode", "chars", "inputs", "network", "crf"))
    times["predict_rest"] = max(get("predict", 0.0) - inside, 0.0)
    return times


def _torch_pass(model: str, path: str, input_format: str, batch_size: int, cache_dir: str | None,
                clock: StageClock) -> tuple[Any, int]:
    from textorch.models import cpu_decoder
    from textorch.models.crf import CRF
    from textorch.tagging.encoded import EncodedData
    from textorch.tagging.labeler import SequenceLabeler

    labeler = SequenceLabeler.load(model, cache_dir=cache_dir, engine="torch")
    labeler.preload_crf_decoder()  # Numba's load is the process's start-up, not a stage
    clock.wrap(labeler, "encode", "encode")
    clock.wrap(EncodedData, "token_vectors", "chars")
    clock.wrap(EncodedData, "batch", "inputs")
    clock.wrap(labeler.model, "decode", "decode")
    clock.wrap(cpu_decoder, "crf_paths", "crf")
    clock.wrap(CRF, "best_paths_with_confidence", "crf")
    clock.wrap(labeler, "predict", "predict")
    return _sequences(labeler, path, input_format, batch_size, clock)


def _onnx_pass(model: str, path: str, input_format: str, batch_size: int, quantized: bool, route: str,
               cache_dir: str | None, threads: int, clock: StageClock) -> tuple[Any, int]:
    from textorch.tagging.onnx_tagger import OnnxTagger

    tagger = OnnxTagger.open(model, threads=threads, quantized=quantized, cache_dir=cache_dir)
    clock.wrap(tagger.session, "run", "network")
    if tagger.char_session is not None:
        clock.wrap(tagger.char_session, "run", "chars")
    clock.wrap(tagger.encoder, "encode_call", "encode")
    clock.wrap(tagger, "_inputs", "inputs")
    clock.wrap(tagger, "_decode", "crf")
    if input_format == "grobid" and route == "rows":
        return _rows(tagger, path, batch_size, clock)
    clock.wrap(tagger, "predict", "predict")
    return _sequences(tagger, path, input_format, batch_size, clock)


def _sequences(tagger: Any, path: str, input_format: str, batch_size: int, clock: StageClock) -> tuple[Any, int]:
    """The command's sequence route (``TaggingRun`` and ``TaggedWriter``): chunks of parsed
    sequences, each tagged (labels only, as for CoNLL and GROBID output) and written."""
    block = grobid_block if input_format == "grobid" else conll_block
    size = ChunkSize()
    sequences = clock.iterate(stream_for_tagging(path, input_format, tagger), "parse")
    written = hashlib.sha256()
    tokens = 0
    for part in chunks(sequences, size.sequences, size.tokens):
        predictions = tagger.predict(part, batch_size=batch_size, with_scores=False)
        with clock.timing("write"):
            text = "".join([block(s, p.labels) for s, p in zip(part, predictions)])
        written.update(text.encode("utf-8"))
        tokens += sum(map(len, part))
    return written, tokens


def _rows(tagger: Any, path: str, batch_size: int, clock: StageClock) -> tuple[Any, int]:
    """The command's row route (:class:`~textorch.tagging.row_tagging.RowTaggingRun`); reading
    (blocks, chunks, columns) is what the pass spends outside ``tag_columns``/``predict`` and
    the writing. A chunk the parser reads goes through ``predict`` and so ``tag_columns`` too:
    one clock for both."""
    clock.wrap(tagger, "tag_columns", "predict")
    clock.wrap(row_tagging, "grobid_rows_text", "write")
    written = hashlib.sha256()
    run = row_tagging.RowTaggingRun(tagger, path, grobid_width(path, tagger), batch_size)
    with clock.timing("whole"):
        for text, _ in run:
            written.update(text.encode("utf-8"))
    seconds = clock.seconds
    if clock.active:
        seconds["parse"] = max(seconds.pop("whole") - seconds.get("predict", 0.0) - seconds.get("write", 0.0), 0.0)
    return written, run.n_tokens
