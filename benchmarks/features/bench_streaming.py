"""Peak memory and throughput of ``textorch seq tag`` on a GROBID input of N tokens.

Streaming must keep peak memory flat whatever the input size: this tags generated inputs of
each size (default 2M and 20M tokens) in a fresh process each and reports that process's peak
RSS (``os.wait4``'s resource usage of the child) and wall time beside the tagging rate.

    python -m benchmarks bench_streaming                       # 2M and 20M tokens
    python -m benchmarks bench_streaming --tokens 200000 2000000

The input is the GROBID date training file of ../shared repeated to N tokens (its gold label
column is recognised and ignored), or, without ../shared, generated date sequences
(``common.generated_date_blocks``); it is
written to a temporary folder and removed afterwards. The model is ``--model`` or one trained
here for one epoch on 500 sequences of the same data (quality is beside the point: memory
and the route are the same).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import REPO, RESULTS, generated_date_blocks, machine, print_table


def _source_blocks() -> tuple[list[str], str]:
    """Sequences (as text blocks) to repeat, and where they come from."""
    shared = Path(os.environ.get("TEXTORCH_SHARED_DATA", REPO.parent / "shared" / "data")) / "grobid" / "date"
    files = sorted(shared.glob("date-*.train")) if shared.is_dir() else []
    if not files:
        return generated_date_blocks(500), "generated date sequences (benchmarks/common.py)"
    text = files[-1].read_text(encoding="utf-8")
    blocks, current = [], []
    for line in text.split("\n"):
        if line.strip():
            current.append(line)
        elif current:
            blocks.append("\n".join(current) + "\n\n")
            current = []
    if current:
        blocks.append("\n".join(current) + "\n\n")
    return blocks, str(files[-1])


def write_input(path: Path, blocks: list[str], n_tokens: int) -> int:
    """Repeat ``blocks`` until ``n_tokens`` token lines are written; the number written."""
    written = 0
    with open(path, "w", encoding="utf-8") as out:
        while written < n_tokens:
            for block in blocks:
                out.write(block)
                written += block.count("\n") - 1
                if written >= n_tokens:
                    break
    return written


def _textorch(*args: str) -> list[str]:
    return [sys.executable, "-m", "textorch.cli.main", *args]


def _env(threads: int) -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": str(threads)}


def train_model(workdir: Path, blocks: list[str], threads: int) -> Path:
    train = workdir / "train.grobid"
    train.write_text("".join(blocks[:500]), encoding="utf-8")
    model = workdir / "model"
    subprocess.run(_textorch("seq", "train", "--train", str(train), "--output", str(model), "--max-epoch", "1",
                             "--device", "cpu", "--threads", str(threads), "--early-stop", "false"),
                   check=True, env=_env(threads), stdout=subprocess.DEVNULL)
    return model


def measure(model: Path, source: Path, output: Path, threads: int, extra: list[str]) -> dict:
    """Tag ``source`` in a fresh process; its wall time and peak RSS, and its own stats."""
    stats = output.with_suffix(".stats.json")
    command = _textorch("seq", "tag", "--model", str(model), "--input", str(source), "--input-format", "grobid",
                        "--output", str(output), "--device", "cpu", "--threads", str(threads), "--quiet",
                        "--stats-json", str(stats), *extra)
    started = time.perf_counter()
    process = subprocess.Popen(command, env=_env(threads))
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"tagging failed: {' '.join(command)}")
    tagged = json.loads(stats.read_text())
    return {"wall_s": round(wall, 2), "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
            "tag_s": tagged["tag_s"], "n_tokens": tagged["n_tokens"], "n_sequences": tagged["n_sequences"],
            "tokens_per_s_whole": round(tagged["n_tokens"] / wall, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, nargs="+", default=[2_000_000, 20_000_000], help="input sizes in tokens")
    parser.add_argument("--model", help="model directory (default: one trained here for one epoch)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--workdir", help="folder for the generated files (default: a temporary one, removed)")
    parser.add_argument("--json", help="results file (default: benchmarks/results/streaming.json)")
    parser.add_argument("tag_options", nargs="*", help="more options for seq tag, after --")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.workdir) as scratch:
        workdir = Path(scratch)
        blocks, origin = _source_blocks()
        model = Path(args.model) if args.model else train_model(workdir, blocks, args.threads)
        rows = []
        for n_tokens in args.tokens:
            source = workdir / f"input-{n_tokens}.grobid"
            write_input(source, blocks, n_tokens)
            row = {"tokens": n_tokens, **measure(model, source, workdir / "tagged.grobid", args.threads, args.tag_options)}
            source.unlink()
            rows.append(row)
            print_table([row], list(row))
    print()
    print_table(rows, list(rows[0]))
    peaks = [row["peak_rss_mb"] for row in rows]
    spread = (max(peaks) - min(peaks)) / min(peaks)
    print(f"\npeak RSS spread across sizes: {spread:.1%}")
    result = {"benchmark": "streaming", "input": origin, "model": args.model or "trained here, 1 epoch on 500 sequences",
              "threads": args.threads, "rows": rows, "peak_rss_spread": round(spread, 4), "machine": machine()}
    out = Path(args.json) if args.json else RESULTS / "streaming.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
