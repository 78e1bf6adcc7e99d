"""How deep a tagging call runs before it reaches the word LSTM's kernel (issue 42).

Tags, through ``SequenceLabeler.tag``, one call of two sequences of different lengths (the batch
route) and one call of one sequence (the one-sequence route, where the model has it), and records
the Python stack at the word LSTM's kernel call (``torch.lstm`` or oneDNN's
``mkldnn_rnn_layer``, whichever the route takes) with a profiling hook. Prints, per call, the
frames from ``SequenceLabeler.tag`` to the kernel call (both included) and the distinct source
files they are in, then the frames themselves, and every textorch file with a function the call
runs, so that two trees can be compared:

    PYTHONPATH=. python -m benchmarks route_frames benchmarks/work/models/textorch/conll-BidLSTM_CRF-s1 [--cache-dir DIR]

(the suite's seed-1 CoNLL-2003 model: ``python -m benchmarks prepare --models conll`` builds it)
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

from benchmarks.suite_models import cache_dir

KERNELS = ("lstm", "mkldnn_rnn_layer")
WORD_ENCODER_FILES = ("encoders.py", "one_sequence.py")
"""A kernel call with one of these files on its stack is the word LSTM's (the others are the
character encoder's)."""


def word_lstm_stack(labeler: object, texts: list[list[str]]) -> list[traceback.FrameSummary]:
    """The stack from ``SequenceLabeler.tag`` down to the first word-LSTM kernel call of ``tag(texts)``."""
    found: list[list[traceback.FrameSummary]] = []

    def profile(frame, event, arg):  # noqa: ANN001, ANN202
        if event == "c_call" and not found and getattr(arg, "__name__", "") in KERNELS:
            stack = traceback.extract_stack(frame)
            if any(Path(f.filename).name in WORD_ENCODER_FILES for f in stack):
                found.append(stack)

    sys.setprofile(profile)
    try:
        labeler.tag(texts)  # type: ignore[attr-defined]
    finally:
        sys.setprofile(None)
    if not found:
        raise SystemExit("no word-LSTM kernel call seen")
    stack = found[0]
    start = max(i for i, f in enumerate(stack) if f.name == "tag" and f.filename.endswith("labeler.py"))
    return stack[start:]


def files_run(labeler: object, texts: list[list[str]]) -> list[str]:
    """textorch's source files (package-relative) with a Python function run by ``tag(texts)``."""
    seen: dict[str, None] = {}

    def profile(frame, event, arg):  # noqa: ANN001, ANN202
        if event == "call":
            name = frame.f_code.co_filename
            if "/textorch/" in name:
                seen.setdefault(name[name.rindex("/textorch/") + 1:], None)

    sys.setprofile(profile)
    try:
        labeler.tag(texts)  # type: ignore[attr-defined]
    finally:
        sys.setprofile(None)
    return list(seen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model")
    parser.add_argument("--cache-dir", default=str(cache_dir()))
    args = parser.parse_args()
    import torch

    from textorch.tagging.labeler import SequenceLabeler

    torch.set_num_threads(1)
    labeler = SequenceLabeler.load(args.model, cache_dir=args.cache_dir)
    width = labeler.n_features
    token = ["word", *(["0"] * width)] if width else "word"
    calls = {"batch of two": [[token] * 7, [token] * 3], "one sequence": [[token] * 5]}
    for name, texts in calls.items():
        labeler.tag(texts)  # warm: kept weights, compiled kernels
        stack = word_lstm_stack(labeler, texts)
        files = list(dict.fromkeys(Path(f.filename).name for f in stack))
        run = files_run(labeler, texts)
        print(f"{name}: {len(stack)} frames in {len(files)} files to the word LSTM's kernel; "
              f"the whole call runs functions of {len(run)} textorch files")
        for frame in stack:
            print(f"    {Path(frame.filename).name}:{frame.lineno} {frame.name}")
        print("    files run: " + " ".join(run))


if __name__ == "__main__":
    main()
