"""Where a tagging run's time goes: each stage of tagging whole files, PyTorch or ONNX Runtime.

    python -m benchmarks stages --model DIR... --input FILE... [--engine torch|onnx] [--quantized]
        [--input-format grobid|conll] [--route rows|sequences] [--batch-size 32] [--repeats 3]
        [--threads 1] [--pause-collector] [--tune-allocator] [--cache-dir DIR]
        [--wapiti PATH --wapiti-model FILE... --wapiti-input FILE...] [--profile [--top 25]] [--output NAME]

In one process, each ``--model`` tags its ``--input`` chunk by chunk, as ``seq tag`` streams it
(``--engine torch``: the PyTorch ``SequenceLabeler``; ``--engine onnx``: the torch-free tagger,
which needs a current export, ``textorch export onnx --model DIR [--quantize]``), and the CPU
seconds of each stage are taken: reading, encoding, the character encoder, the network's
inputs, the network, the CRF, the rest of ``predict`` and writing (``stage_clocks``). Each stage's
time is the best of ``--repeats`` passes, a fresh tagger each. A fresh-process timing on a shared
machine is too noisy to see one stage change; the stages of one process are not.

With ``--wapiti``, ``wapiti label`` tags the same lines (``--wapiti-input``, unlabelled) in
``--repeats`` fresh processes, and its median CPU seconds (whole process, start-up included)
stand beside the stages: whether anything around the network could close a gap to Wapiti, or
whether the network alone already costs what Wapiti's whole process does.

``--profile``: after the timed passes, one more pass of the first model under cProfile (and,
with ``--engine torch``, one under torch.profiler): the top functions by cumulative and by own
time, the top operators by self CPU time; the cProfile dump goes to
``benchmarks/work/stages-ENGINE-MODEL.pstats`` (``python -m pstats`` opens it). To profile
training, run the command under cProfile: ``python -m cProfile -o OUT -m textorch seq train ...``.

One row per ``--model``; writes ``results/NAME.json`` (default ``stages-ENGINE``, with ``-int8``
for ``--quantized``, ``-collector-paused`` and ``-sequence-route`` where those apply).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import pstats
import resource
import statistics
import subprocess
from pathlib import Path

from benchmarks.common import REPO, machine, print_table, write_json
from benchmarks.diagnostics.stage_clocks import ENGINES, ROUTES, STAGES, StageClock, one_pass


def wapiti_cpu_s(wapiti: str, model: str, unlabelled: str, repeats: int) -> list[float]:
    """CPU seconds (user + system) of ``wapiti label`` on the file, one fresh process each."""
    seconds = []
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([wapiti, "label", "-m", model, unlabelled, "/dev/null"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        seconds.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    return seconds


def default_name(args: argparse.Namespace) -> str:
    """The results file's name when ``--output`` is not given: the set-up it measured."""
    route = args.engine == "onnx" and args.input_format == "grobid" and args.route == "sequences"
    return (f"stages-{args.engine}" + ("-int8" if args.quantized else "")
            + ("-collector-paused" if args.pause_collector else "") + ("-sequence-route" if route else ""))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options, with those that do not go together refused before anything is read."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", nargs="+", required=True, help="saved sequence-labelling model directories")
    parser.add_argument("--input", nargs="+", required=True, help="the file each model tags, as `seq tag --input`")
    parser.add_argument("--engine", default="torch", choices=ENGINES, help="what runs the network, as `seq tag --engine`")
    parser.add_argument("--quantized", action="store_true",
                        help="the int8 export (`--engine onnx` only; `export onnx --quantize` first)")
    parser.add_argument("--input-format", default="grobid", choices=("grobid", "conll"))
    parser.add_argument("--route", default="rows", choices=ROUTES,
                        help="ONNX engine, GROBID input: read and written as rows, as `seq tag` does, or by sequence objects")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="threads of PyTorch or ONNX Runtime")
    parser.add_argument("--pause-collector", action="store_true",
                        help="pause the cyclic garbage collector during the passes, as `textorch --pause-collector` does")
    parser.add_argument("--tune-allocator", action="store_true",
                        help="glibc's allocator thresholds, as `textorch --tune-allocator` sets them")
    parser.add_argument("--cache-dir", default=None, help="word-vector cache, as `seq tag --cache-dir`")
    parser.add_argument("--wapiti", help="the wapiti binary, to time `wapiti label` on the same lines")
    parser.add_argument("--wapiti-model", nargs="+", help="the Wapiti model of each corpus")
    parser.add_argument("--wapiti-input", nargs="+", help="each file's lines without labels, as `wapiti label` reads them")
    parser.add_argument("--profile", action="store_true", help="one more pass under cProfile (and torch.profiler)")
    parser.add_argument("--top", type=int, default=25, help="functions and operators --profile prints")
    parser.add_argument("--output", help="results file name under benchmarks/results/, without .json")
    args = parser.parse_args(argv)
    if len(args.input) != len(args.model):
        parser.error("give one --input per --model")
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if args.quantized and args.engine != "onnx":
        parser.error("--quantized needs --engine onnx")
    if (args.wapiti_model or args.wapiti_input) and not args.wapiti:
        parser.error("--wapiti-model and --wapiti-input need --wapiti (the binary)")
    if args.wapiti and not (len(args.wapiti_model or []) == len(args.wapiti_input or []) == len(args.model)):
        parser.error("--wapiti needs one --wapiti-model and one --wapiti-input per --model")
    return args


def measure(args: argparse.Namespace, model: str, path: str) -> list[tuple[dict[str, float], str, int]]:
    """``--repeats`` timed passes of ``model`` over ``path``."""
    results = []
    for _ in range(args.repeats):
        if args.pause_collector:
            gc.disable()
        try:
            results.append(one_pass(model, path, args.engine, args.input_format, args.batch_size, args.quantized,
                                    args.route, args.cache_dir, args.threads))
        finally:
            gc.enable()
    digests = {digest for _, digest, _ in results}
    if len(digests) != 1:
        raise SystemExit(f"{model}: the passes wrote different text (labels changed between passes)")
    return results


def profile(args: argparse.Namespace, model: str, path: str) -> None:
    """One unmeasured pass under cProfile, printed and dumped; with PyTorch, one under torch.profiler."""
    def run() -> None:
        one_pass(model, path, args.engine, args.input_format, args.batch_size, args.quantized, args.route,
                 args.cache_dir, args.threads, clock=StageClock(active=False))

    profiler = cProfile.Profile()
    profiler.runcall(run)
    work = REPO / "benchmarks" / "work"
    work.mkdir(parents=True, exist_ok=True)
    dump = work / f"stages-{args.engine}-{Path(model).name}.pstats"
    profiler.dump_stats(str(dump))
    for key in ("cumulative", "tottime"):
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).strip_dirs().sort_stats(key).print_stats(args.top)
        text = out.getvalue()
        print(f"===== cProfile, sorted by {key} =====\n{text[text.find('   ncalls'):]}")
    print(f"cProfile dump: {dump}")
    if args.engine == "torch":
        import torch

        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as operators:
            run()
        print("===== torch.profiler, top operators by self CPU time =====")
        print(operators.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.top))


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.tune_allocator:
        from textorch.runtime.malloc_tuning import keep_freed_memory

        keep_freed_memory()
    if args.engine == "torch":
        import torch

        torch.set_num_threads(args.threads)
    rows, details = [], []
    for i, (model, path) in enumerate(zip(args.model, args.input)):
        results = measure(args, model, path)
        passes = [times for times, _, _ in results]
        best = {stage: min(p[stage] for p in passes) for stage in STAGES}
        tokens = results[0][2]
        row: dict[str, object] = {"model": Path(model).name, "tokens": tokens,
                                  **{k: round(v, 3) for k, v in best.items()}, "sum": round(sum(best.values()), 3)}
        wapiti = None
        if args.wapiti:
            wapiti = wapiti_cpu_s(args.wapiti, args.wapiti_model[i], args.wapiti_input[i], args.repeats)
            row["wapiti"] = round(statistics.median(wapiti), 3)
            row["network/wapiti"] = round(best["network"] / statistics.median(wapiti), 2)
            row["sum/wapiti"] = round(sum(best.values()) / statistics.median(wapiti), 2)
        rows.append(row)
        details.append({"model": model, "input": path, "best_cpu_s": best, "passes": passes, "tokens": tokens,
                        "sha256": results[0][1], "wapiti_cpu_s": wapiti})
        print_table([row], list(row))
    if len(rows) > 1:
        print_table(rows, list(rows[0]))
    route = args.route if args.engine == "onnx" and args.input_format == "grobid" else "sequences"
    written = write_json(args.output or default_name(args), {
        "machine": machine(), "args": vars(args), "rows": rows, "runs": details, "route": route,
        "collector": "paused" if args.pause_collector else "running",
        "engine": args.engine + (" int8" if args.quantized else "")})
    print(f"written: {written}")
    if args.profile:
        profile(args, args.model[0], args.input[0])


if __name__ == "__main__":
    main()
