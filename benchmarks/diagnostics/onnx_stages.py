"""Where the torch-free tagger's time goes on a whole file: each stage, the network alone, and Wapiti.

    .venv/bin/python -m benchmarks onnx_stages --model DIR... --input FILE... [--input-format grobid]
        [--batch-size 32] [--repeats 3] [--pause-collector] [--quantized] [--route rows|sequences]
        [--wapiti PATH --wapiti-model FILE... --wapiti-input FILE...]

In one process and one thread, the ONNX Runtime tagger (``seq tag --engine onnx``; the model
needs a current export, ``textorch export onnx --model DIR``) tags ``--input`` chunk by chunk,
as the command streams it, and each stage is timed in CPU seconds: reading the file (GROBID
input: into chunks of rows and their columns, as ``seq tag`` reads it; ``--route sequences``,
or CoNLL input: into sequence objects), encoding, the character encoder's graph, building the network's inputs, the
network's graph (``session.run``), the CRF's decoding, the rest of ``predict`` (sorting, label
names) and writing the tagged text. Each stage's time is the best of ``--repeats`` passes.
The cyclic collector runs, as in the command, unless ``--pause-collector``; its time falls on
whichever stage allocates when it runs. With ``--wapiti``, ``wapiti label`` tags the same lines
(``--wapiti-input``, unlabelled) in ``--repeats`` fresh processes, and its median CPU seconds
(whole process, start-up included) stand beside the stages.

Why: issue 41 asks for whole-process throughput at least Wapiti's. Where textorch is behind,
this says whether anything around the network could close the gap, or whether the network's
own graph already costs about what Wapiti's whole process does. One row per ``--model``; writes
``results/onnx-stages.json`` (``onnx-stages-collector-paused.json`` with ``--pause-collector``;
``onnx-stages-int8.json`` with ``--quantized``, the int8 export's tagger; ``-sequence-route``
added with ``--route sequences``).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import resource
import statistics
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any
from pathlib import Path

from benchmarks.common import machine, print_table, write_json
from textorch.data.streams import chunks
from textorch.data.writers import conll_block, grobid_block
from textorch.tagging.onnx_tagger import OnnxTagger
from textorch.tagging import row_tagging
from textorch.tagging.tag_files import ChunkSize, grobid_width, stream_for_tagging

STAGES = ("parse", "encode", "char_graph", "inputs", "network_graph", "crf", "predict_rest", "write")


def _timed_method(function: Callable, clock: Callable[[float], None]) -> Callable:
    def timed(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        started = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            clock(time.process_time() - started)
    return timed


def _timed_iterator(items: Iterator, clock: Callable[[float], None]) -> Iterator:
    """``items``, the CPU seconds of producing each added to ``clock``."""
    while True:
        started = time.process_time()
        try:
            item = next(items)
        except StopIteration:
            clock(time.process_time() - started)
            return
        clock(time.process_time() - started)
        yield item


def one_pass(model: str, path: str, input_format: str, batch_size: int,
             quantized: bool = False, route: str = "rows") -> tuple[dict[str, float], str, int]:
    """CPU seconds of each stage over the whole file, one pass, a fresh tagger; the SHA-256 of
    the text it wrote (the timing must not change a label: the test compares it); the tokens.
    ``route``: ``rows``, GROBID input read, encoded and written as rows as ``seq tag`` does
    (:mod:`textorch.tagging.row_tagging`; CoNLL input always goes by sequences), or
    ``sequences``, each sequence parsed into an object and written back by ``grobid_block``."""
    times = dict.fromkeys(STAGES, 0.0)

    def clock_of(stage: str) -> Callable[[float], None]:
        def add(seconds: float) -> None:
            times[stage] += seconds
        return add

    tagger = OnnxTagger.open(model, threads=1, quantized=quantized)
    tagger.session.run = _timed_method(tagger.session.run, clock_of("network_graph"))  # type: ignore[attr-defined]
    if tagger.char_session is not None:
        tagger.char_session.run = _timed_method(tagger.char_session.run, clock_of("char_graph"))  # type: ignore[attr-defined]
    tagger.encoder.encode_call = _timed_method(tagger.encoder.encode_call, clock_of("encode"))  # type: ignore[method-assign]
    tagger._inputs = _timed_method(tagger._inputs, clock_of("inputs"))  # type: ignore[method-assign]
    tagger._decode = _timed_method(tagger._decode, clock_of("crf"))  # type: ignore[method-assign]
    if input_format == "grobid" and route == "rows":
        written, tokens, predict_s = _rows_pass(tagger, path, batch_size, times)
    else:
        written, tokens, predict_s = _sequences_pass(tagger, path, input_format, batch_size, times)
    inside = ("encode", "char_graph", "inputs", "network_graph", "crf")
    times["predict_rest"] = max(predict_s - sum(times[stage] for stage in inside), 0.0)
    return times, written.hexdigest(), tokens


def _sequences_pass(tagger: OnnxTagger, path: str, input_format: str, batch_size: int,
                    times: dict[str, float]) -> tuple[Any, int, float]:
    block = grobid_block if input_format == "grobid" else conll_block
    size = ChunkSize()

    def parsed(seconds: float) -> None:
        times["parse"] += seconds

    sequences = _timed_iterator(stream_for_tagging(path, input_format, tagger), parsed)  # type: ignore[arg-type]
    predict_s = 0.0
    tokens = 0
    written = hashlib.sha256()
    for part in chunks(sequences, size.sequences, size.tokens):  # streamed as the command streams
        started = time.process_time()
        predictions = tagger.predict(part, batch_size=batch_size, with_scores=False)
        predict_s += time.process_time() - started
        started = time.process_time()
        text = "".join([block(s, p.labels) for s, p in zip(part, predictions)])
        times["write"] += time.process_time() - started
        written.update(text.encode("utf-8"))
        tokens += sum(map(len, part))
    return written, tokens, predict_s


def _rows_pass(tagger: OnnxTagger, path: str, batch_size: int, times: dict[str, float]) -> tuple[Any, int, float]:
    """The command's row route; reading (blocks, chunks, columns) is what the pass spends outside
    ``tag_columns``/``predict`` and the writing of the text."""
    predict = [0.0]

    def add_predict(seconds: float) -> None:
        predict[0] += seconds

    def add_write(seconds: float) -> None:
        times["write"] += seconds

    # predict (a chunk the parser read) goes through tag_columns too: one clock for both
    tagger.tag_columns = _timed_method(tagger.tag_columns, add_predict)  # type: ignore[method-assign]
    original = row_tagging.grobid_rows_text
    row_tagging.grobid_rows_text = _timed_method(original, add_write)  # type: ignore[assignment]
    written = hashlib.sha256()
    try:
        run = row_tagging.RowTaggingRun(tagger, path, grobid_width(path, tagger), batch_size)  # type: ignore[arg-type]
        started = time.process_time()
        for text, _ in run:
            written.update(text.encode("utf-8"))
        total = time.process_time() - started
    finally:
        row_tagging.grobid_rows_text = original  # type: ignore[assignment]
    times["parse"] = max(total - predict[0] - times["write"], 0.0)
    return written, run.n_tokens, predict[0]


def wapiti_cpu_s(wapiti: str, model: str, unlabelled: str, repeats: int) -> list[float]:
    """CPU seconds (user + system) of ``wapiti label`` on the file, one fresh process each."""
    out = Path("/dev/null")
    seconds = []
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([wapiti, "label", "-m", model, unlabelled, str(out)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        seconds.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", nargs="+", required=True,
                        help="saved sequence-labelling model directories, each with a current ONNX export")
    parser.add_argument("--input", nargs="+", required=True, help="the file each model tags, as `seq tag --input`")
    parser.add_argument("--input-format", default="grobid", choices=("grobid", "conll"))
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pause-collector", action="store_true",
                        help="pause the cyclic garbage collector during the passes, as `textorch --pause-collector` does")
    parser.add_argument("--quantized", action="store_true",
                        help="the int8 export (`seq tag --engine onnx --quantized`; `export onnx --quantize` first)")
    parser.add_argument("--route", default="rows", choices=("rows", "sequences"),
                        help="GROBID input read and written as rows, as `seq tag` does (default), or by sequence objects")
    parser.add_argument("--wapiti", help="the wapiti binary, to time `wapiti label` on the same lines")
    parser.add_argument("--wapiti-model", nargs="+", help="the Wapiti model of each corpus")
    parser.add_argument("--wapiti-input", nargs="+", help="each file's lines without labels, as `wapiti label` reads them")
    args = parser.parse_args()
    if len(args.input) != len(args.model):
        parser.error("give one --input per --model")
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if (args.wapiti_model or args.wapiti_input) and not args.wapiti:
        parser.error("--wapiti-model and --wapiti-input need --wapiti (the binary)")
    if args.wapiti and not (len(args.wapiti_model or []) == len(args.wapiti_input or []) == len(args.model)):
        parser.error("--wapiti needs one --wapiti-model and one --wapiti-input per --model")
    rows, details = [], []
    for i, (model, path) in enumerate(zip(args.model, args.input)):
        if args.pause_collector:
            gc.disable()
        try:
            results = [one_pass(model, path, args.input_format, args.batch_size, args.quantized, args.route)
                       for _ in range(args.repeats)]
        finally:
            gc.enable()
        passes = [times for times, _, _ in results]
        best = {stage: min(p[stage] for p in passes) for stage in STAGES}
        n_tokens = results[0][2]
        row: dict[str, object] = {"model": Path(model).name, "tokens": n_tokens,
                                  **{k: round(v, 3) for k, v in best.items()}, "sum": round(sum(best.values()), 3)}
        wapiti = None
        if args.wapiti:
            wapiti = wapiti_cpu_s(args.wapiti, args.wapiti_model[i], args.wapiti_input[i], args.repeats)
            row["wapiti"] = round(statistics.median(wapiti), 3)
            row["network/wapiti"] = round(best["network_graph"] / statistics.median(wapiti), 2)
            row["sum/wapiti"] = round(sum(best.values()) / statistics.median(wapiti), 2)
        rows.append(row)
        details.append({"model": model, "input": path, "best_cpu_s": best, "passes": passes, "tokens": n_tokens,
                        "wapiti_cpu_s": wapiti})
        print_table([row], list(row))
    print_table(rows, list(rows[0]))
    suffix = (("-int8" if args.quantized else "") + ("-collector-paused" if args.pause_collector else "")
              + ("-sequence-route" if args.route == "sequences" else ""))
    path = write_json(f"onnx-stages{suffix}", {"machine": machine(), "args": vars(args), "rows": rows, "runs": details,
                                               "collector": "paused" if args.pause_collector else "running",
                                               "route": args.route if args.input_format == "grobid" else "sequences",
                                               "engine": "onnx int8" if args.quantized else "onnx"})
    print(f"written: {path}")


if __name__ == "__main__":
    main()
