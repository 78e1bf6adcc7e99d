"""Benchmark commands for Wapiti, GROBID's CRF engine, the peer of textorch_runner.py.

Run by bench_vs_delft.py (``--systems ...,wapiti --wapiti PATH``), one fresh process per
command; prints one line ``BENCH_JSON {...}`` on stdout. Wapiti itself is a C program: this
runner only writes its input files, starts it as GROBID's trainer does, times it and reads its
answers back. Build the binary from GROBID's fork kept in ``../shared/peers/wapiti/`` (its
README says how GROBID trains and tags with it):

    bash ../shared/peers/wapiti/build.sh "$TMPDIR/wapiti-build"    # prints the binary's path

Commands:
    train    write the seed's train and validation sequences as one GROBID training file (Wapiti
             has no validation set: GROBID trains it on everything), train with GROBID's
             parameters and template, label the test split, write gold and predicted labels
    measure  run one command (any system's whole-process tagging of a file) as this process's only
             child: its wall time and peak resident memory
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

# Started by path (``python benchmarks/peers/wapiti_runner.py``) by bench_vs_delft.py: its own directory is
# then first on sys.path. Imported as ``benchmarks.peers.wapiti_runner`` by bench_vs_delft.py and wapiti_peer.py.
if __package__:
    from .runner_common import emit as _emit, read_blocks, write_predictions
else:
    from runner_common import emit as _emit, read_blocks, write_predictions

GROBID_TRAINING = ("-e", "0.00001", "-w", "20", "-i", "2000")
"""Epsilon, window and iteration cap of GROBID's ``WapitiTrainer`` (the rest: Wapiti's defaults,
L-BFGS with its elastic-net penalty)."""


def training_parameters(max_iterations: int | None) -> list[str]:
    """GROBID's training options, ``-i`` lowered to ``max_iterations`` where a run is capped
    (further seeds of a big model at the iterations its first seed reached in two hours)."""
    if max_iterations is None:
        return list(GROBID_TRAINING)
    return [*GROBID_TRAINING[:-1], str(max_iterations)]


def iteration_count(text: str) -> int:
    """An ``--iterations`` value: a whole number of at least 1 (argparse names the option on error)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of iterations, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def emit(payload: dict, threads: int) -> None:
    _emit(payload, threads)


def write_blocks(path: str | Path, blocks: Sequence[Sequence[str]], labelled: bool = True) -> int:
    """Write sequences as a GROBID file (one token line each, a blank line after every sequence);
    with ``labelled=False`` the last column, the label, is left out, as GROBID hands Wapiti the
    text to tag. Returns the number of tokens written."""
    tokens = 0
    with open(path, "w", encoding="utf-8") as out:
        for lines in blocks:
            for line in lines:
                fields = line.split()
                out.write(" ".join(fields if labelled else fields[:-1]) + "\n")
                tokens += 1
            out.write("\n")
    return tokens


def read_labels(path: str | Path, expected: Sequence[int] | None = None) -> list[list[str]]:
    """The last column of a file ``wapiti label`` wrote (each input line with its predicted label
    appended), sequence by sequence; ``expected``: the lengths the input had, checked so that a
    misread output cannot be scored against the wrong tokens."""
    labels = [[line.split()[-1] for line in block] for block in read_blocks(path)]
    if expected is not None:
        found = [len(block) for block in labels]
        if found != list(expected):
            first = next((i for i, (a, b) in enumerate(zip(found, expected)) if a != b), min(len(found), len(expected)))
            raise SystemExit(f"{path}: {len(found)} sequences read back for {len(expected)} written; "
                             f"first mismatch at sequence {first + 1}")
    return labels


def children_cpu_s() -> float:
    """User and system CPU seconds of every child waited for so far: the difference around one
    child is that child's, whatever else the machine runs (its wall time is not, on a shared
    machine)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def children_peak_rss_mb() -> float:
    """Peak resident memory of the largest child process waited for so far (Linux: KiB)."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def run_timed(cmd: Sequence[str], log: str | Path | None = None, limit_s: float | None = None) -> float:
    """Wall seconds of ``cmd`` (stdout and stderr to ``log``); exits naming the log on failure.

    ``limit_s``: after that many seconds ``cmd`` gets SIGINT, on which ``wapiti train`` ends its
    optimisation at the iteration it is in and writes the model it has (its own interrupt rule),
    as ``-i N`` would have stopped it."""
    started = time.perf_counter()
    with open(log or os.devnull, "w", encoding="utf-8") as err:
        child = subprocess.Popen(list(cmd), stdout=err, stderr=subprocess.STDOUT)
        try:
            child.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            child.send_signal(signal.SIGINT)
            child.wait()
        done = child
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, cmd))}: exit {done.returncode}" + (f", see {log}" if log else ""))
    return seconds


def last_iteration(log: str | Path) -> int | None:
    """The last L-BFGS iteration Wapiti printed (``  [  42] obj=...``), or None."""
    last = None
    for line in Path(log).read_text(encoding="utf-8", errors="replace").splitlines():
        text = line.strip()
        if text.startswith("[") and "]" in text and "obj=" in text:
            try:
                last = int(text[1:text.index("]")])
            except ValueError:
                continue
    return last


def last_training_error(log: str | Path) -> str | None:
    """The token/sequence training error of the last iteration Wapiti printed (``err= 0.02%/15.45%``)."""
    last = None
    for line in Path(log).read_text(encoding="utf-8", errors="replace").splitlines():
        if "obj=" in line and "err=" in line:  # "err= 0.04%/ 5.97% time=...": tokens / sequences
            last = line.split("err=", 1)[1].split("time=", 1)[0].replace(" ", "")
    return last


def to_iob2(labels: list[list[str]]) -> list[list[str]]:
    """GROBID labels as the suite scores every system's: textorch's reading of GROBID labels."""
    from textorch.data.tags import grobid_to_iob2

    return [grobid_to_iob2(sequence) for sequence in labels]


def cmd_train(args: argparse.Namespace) -> None:
    """Train as GROBID trains (``wapiti train --nthread N -e 0.00001 -w 20 -i 2000 -p TEMPLATE``)
    on train + validation, then label the test split with ``wapiti label``.

    ``whole_s`` is the training process, start to exit (reading the file, building features,
    every iteration, writing the model); the files are written before its clock starts.
    """
    model = Path(args.model)
    model.parent.mkdir(parents=True, exist_ok=True)
    blocks = read_blocks(args.train) + read_blocks(args.valid)
    test = read_blocks(args.test)
    record = model.with_name(model.name + ".result.json")
    split = split_digest(blocks, test, args.template)
    if args.reuse and _reused(record, split, args.predictions, args.iterations):
        return
    training_file = model.with_name(model.name + ".train")
    n_tokens = write_blocks(training_file, blocks)
    log = model.with_name(model.name + ".train.log")
    parameters = training_parameters(args.iterations)
    cpu_before = children_cpu_s()
    whole_s = run_timed([args.wapiti, "train", "--nthread", str(args.threads), *parameters,
                         "-p", args.template, str(training_file), str(model)], log, args.time_limit)
    train_rss, train_cpu_s = children_peak_rss_mb(), children_cpu_s() - cpu_before
    unlabelled = model.with_name(model.name + ".test.in")
    write_blocks(unlabelled, test, labelled=False)
    tagged = model.with_name(model.name + ".test.out")
    label_s = run_timed([args.wapiti, "label", "-m", str(model), str(unlabelled), str(tagged)])
    gold = [[line.split()[-1] for line in lines] for lines in test]
    pred = read_labels(tagged, [len(lines) for lines in gold])
    write_predictions(args.predictions, to_iob2(gold), to_iob2(pred))
    payload = {"system": "wapiti", "task": args.task, "seed": args.seed, "template": args.template,
          "training_parameters": parameters, "max_iterations": args.iterations, "iterations": last_iteration(log),
          "time_limit_s": args.time_limit, "stopped_at_time_limit": bool(args.time_limit and whole_s >= args.time_limit),
          "last_training_error": last_training_error(log),
          "n_train_sequences": len(blocks), "n_train_tokens": n_tokens, "whole_s": whole_s,
          "whole_tokens_per_s": n_tokens / max(whole_s, 1e-9), "train_cpu_s": train_cpu_s, "train_peak_rss_mb": train_rss,
          "label_test_s": label_s, "model_mb": model.stat().st_size / 2**20, "model_dir": str(model),
          "threads": args.threads, "split_digest": split}
    if args.predictions:
        payload["predictions"] = json.loads(Path(args.predictions).read_text(encoding="utf-8"))
    record.write_text(json.dumps(payload) + "\n", encoding="utf-8")
    payload.pop("predictions", None)
    emit(payload, args.threads)


def split_digest(train: Sequence[Sequence[str]], test: Sequence[Sequence[str]], template: str) -> str:
    """A fingerprint of what a Wapiti run learns from and is scored on: the training and test
    lines and the template's text."""
    digest = hashlib.sha256(Path(template).read_bytes())
    for part in (train, test):
        for block in part:
            digest.update("\n".join(block).encode("utf-8") + b"\n\n")
        digest.update(b"--")
    return digest.hexdigest()


def _reused(record: Path, split: str, predictions: str | None, max_iterations: int | None = None) -> bool:
    """Emit a finished run of the same split (its record beside the model) instead of training
    again: GROBID's big models take Wapiti hours. False when there is none to reuse."""
    if not record.exists():
        return False
    payload = json.loads(record.read_text(encoding="utf-8"))
    if payload.get("split_digest") != split or not Path(payload.get("model_dir", "")).exists():
        return False
    if payload.get("max_iterations") != max_iterations:
        return False
    written = payload.pop("predictions", None)
    if predictions and written is not None:
        Path(predictions).write_text(json.dumps(written) + "\n", encoding="utf-8")
    payload["reused"] = str(record)
    emit(payload, int(payload.get("threads", 1)))
    return True


def cmd_measure(args: argparse.Namespace) -> None:
    """One command as the only child of this process: its wall time, its CPU seconds and its peak
    RSS (``getrusage(RUSAGE_CHILDREN)`` after it exits), the same measure for every system."""
    command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not command:
        raise SystemExit("measure: give the command after --")
    wall_s = run_timed(command, args.log)
    emit({"wall_s": wall_s, "cpu_s": children_cpu_s(), "peak_rss_mb": children_peak_rss_mb(), "command": command},
         args.threads)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1, help="Wapiti's --nthread (GROBID's benchmark: 1)")
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("train")
    p.add_argument("--wapiti", required=True, help="the wapiti binary")
    p.add_argument("--template", required=True, help="GROBID's MODEL.crf-template")
    p.add_argument("--task", required=True)
    p.add_argument("--seed", type=int, required=True)
    for role in ("train", "valid", "test"):
        p.add_argument(f"--{role}", required=True)
    p.add_argument("--model", required=True, help="model file to write (its training files go beside it)")
    p.add_argument("--predictions", default=None, help="write the test set's gold and predicted labels here (JSON)")
    p.add_argument("--reuse", action="store_true",
                   help="a finished run of the same split and template (MODEL.result.json beside the model) is "
                        "reported again instead of training")
    p.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                   help="stop the optimisation after this long (7200, two hours, for GROBID's big models): "
                        "the model of the last iteration is kept, its iteration count and training error reported")
    p.add_argument("--iterations", type=iteration_count, default=None, metavar="N",
                   help="wapiti's -i N in place of GROBID's 2000: the iterations another seed's two-hour run "
                        "reached, for runs GROBID's criterion does not stop (reported as max_iterations)")
    p.set_defaults(run=cmd_train)
    p = commands.add_parser("measure")
    p.add_argument("--log", default=None, help="the command's output (default: discarded)")
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    p.set_defaults(run=cmd_measure)
    args = parser.parse_args(argv)
    args.run(args)


if __name__ == "__main__":
    main()
