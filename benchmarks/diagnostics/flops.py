"""How close is textorch's CPU path to this machine's limit?

Compares the floating-point rate achieved by the BiLSTM-CRF forward pass (the tagging path) with
the rate of a large matrix product on the same cores and threads: the practical ceiling of
this CPU for fp32 work (the faster of PyTorch's BLAS and oneDNN, both printed). Prints one table and writes results/flops.json.

    .venv/bin/python -m benchmarks flops                 # CoNLL-2003 eng.testb, batches 1, 32, 256
    .venv/bin/python -m benchmarks flops --threads 1

Counting: recurrent layers are counted analytically (torch's FLOP counter does not see the
fused CPU LSTM kernel): per token, direction and layer, 2 * gates * H * (I + H) multiply-adds
for the input and recurrent products (gates = 4 for an LSTM, 3 for a GRU); element-wise gate
arithmetic is left out, so rates are slight underestimates. Everything else (linear layers,
CRF) is counted by ``torch.utils.flop_counter.FlopCounterMode``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
from torch import nn

from benchmarks.common import machine, print_table, shared, write_json  # noqa: E402


def matmul_gflops(n: int, repeats: int = 5, library: str = "mkl") -> float | None:
    """Best-of-repeats rate of an (n x n) x (n x n) fp32 product: the machine's practical ceiling.

    ``mkl`` is ``torch.mm`` (PyTorch's BLAS), ``onednn`` oneDNN's product, on which its LSTM
    kernels build (None where this torch lacks it). Both are measured because they differ:
    on an AMD CPU with AVX-512, MKL keeps to its AVX2 code and reached 117 GFLOP/s against
    oneDNN's 265, and oneDNN's LSTM then ran at 150 % of the MKL figure."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    if library == "mkl":
        product = lambda: torch.mm(a, b)  # noqa: E731
    else:
        from textorch.runtime.onednn_ops import mkldnn_op

        linear_pointwise = mkldnn_op("_linear_pointwise")
        if linear_pointwise is None:
            return None
        product = lambda: linear_pointwise(a, b, None, "none", [], "")  # noqa: E731
    with torch.inference_mode():
        product()  # warm-up
        best = float("inf")
        for _ in range(repeats):
            started = time.perf_counter()
            product()
            best = min(best, time.perf_counter() - started)
    return 2 * n**3 / best / 1e9


class RecurrentFlops:
    """Hooks giving every nn.LSTM / nn.GRU call its analytic multiply-add FLOPs.

    With packed input the CPU LSTM runs step by step through ``addmm`` calls that the FLOP
    counter does see, while the fused kernel used for padded input is invisible to it; so what
    the counter records inside a recurrent module is taken out again and replaced by the
    analytic count, which is the same whichever kernel runs. Layers run direction by direction
    (``textorch.models.padded_rnn.padded_rnn``, on padded input and, where the LSTM's weights
    are kept laid out, on rows without padding: no module call) are counted the same way, every
    padded position included: that work is done.
    """

    def __init__(self, model: nn.Module, counter: object) -> None:
        """``counter``: a running ``FlopCounterMode`` (anything with ``get_total_flops()``)."""
        self.counter = counter
        self.flops = 0
        self.counted_inside = 0
        self._before: list[int] = []
        self.handles = []
        for module in model.modules():
            if isinstance(module, (nn.LSTM, nn.GRU)):
                self.handles.append(module.register_forward_pre_hook(self._pre))
                self.handles.append(module.register_forward_hook(self._post))
        from textorch.models import padded_rnn

        self._padded_module, self._padded = padded_rnn, padded_rnn.padded_rnn

        def counted(rnn: nn.RNNBase, x, lengths, routes=None):  # noqa: ANN001
            self._add(rnn, x.shape[0] * x.shape[1])
            return self._padded(rnn, x, lengths, routes)

        padded_rnn.padded_rnn = counted

    def _pre(self, _module: nn.Module, _inputs: tuple) -> None:
        self._before.append(self.counter.get_total_flops())

    def _post(self, module: nn.RNNBase, inputs: tuple, _output: object) -> None:
        self.counted_inside += self.counter.get_total_flops() - self._before.pop()
        x = inputs[0]
        if isinstance(x, nn.utils.rnn.PackedSequence):
            tokens = x.data.shape[0]
        else:
            tokens = x.shape[0] * x.shape[1] if x.dim() == 3 else x.shape[0]
        self._add(module, tokens)

    def _add(self, module: nn.RNNBase, tokens: int) -> None:
        gates = 4 if isinstance(module, nn.LSTM) else 3
        directions = 2 if module.bidirectional else 1
        h = module.hidden_size
        size_in = module.input_size
        for _ in range(module.num_layers):
            self.flops += tokens * directions * 2 * gates * h * (size_in + h)
            size_in = h * directions

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()
        self._padded_module.padded_rnn = self._padded


def count_flops(model: nn.Module, fn) -> int:
    from torch.utils.flop_counter import FlopCounterMode  # heavy import (sympy): only when counting

    with FlopCounterMode(display=False) as counter:
        recurrent = RecurrentFlops(model, counter)
        try:
            fn()
        finally:
            recurrent.close()
    return recurrent.flops + counter.get_total_flops() - recurrent.counted_inside


def median_time(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def build_tagger(cache_dir: str | None, limit: int):
    """An (untrained) textorch BidLSTM_CRF with CoNLL-2003 shapes and the shared 100-d vectors."""
    from textorch.tagging.config import DataConfig, ModelConfig
    from textorch.data.readers import read_labelled
    from textorch.embeddings import open_embeddings
    from textorch.tagging.labeler import SequenceLabeler

    corpus = read_labelled(str(shared("data", "conll2003/eng.testb")), None)
    vectors = str(shared("embeddings", "w2v-conll-grobid-100d.txt"))
    embeddings = open_embeddings(vectors, cache_dir=cache_dir)
    labeler = SequenceLabeler.build(corpus, ModelConfig(), DataConfig(embeddings=vectors), embeddings, "cpu")
    labeler.model.eval()
    sequences = corpus.sequences[:limit]
    return labeler, labeler.encode(sequences)


def tagger_rows(labeler, data, batch_sizes: list[int], repeats: int, peak: float) -> list[dict]:
    from textorch.data.batching import sorted_batches

    rows = []
    lengths = data.lengths()
    for batch_size in batch_sizes:
        batches = [data.batch(chunk) for chunk in sorted_batches(lengths, batch_size)]

        @torch.inference_mode()
        def forward() -> None:
            for batch in batches:
                labeler.model.decode(batch)

        flops = count_flops(labeler.model, forward)
        seconds = median_time(forward, repeats)
        rows.append(_row(f"BidLSTM_CRF decode, batch {batch_size}", flops, seconds, peak, sum(lengths)))
    # One training step's worth (forward + backward) at batch 32, the training path.
    batches = [data.batch(chunk) for chunk in sorted_batches(lengths, 32)]
    labeler.model.train()

    def train_pass() -> None:
        for batch in batches:
            labeler.model.zero_grad(set_to_none=True)
            labeler.model(_with_labels(batch)).loss.sum().backward()

    forward_flops = count_flops(labeler.model, lambda: [labeler.model(_with_labels(b)) for b in batches])
    seconds = median_time(train_pass, repeats)
    rows.append(_row("BidLSTM_CRF forward+backward, batch 32 (3x forward FLOPs)", 3 * forward_flops, seconds,
                     peak, sum(lengths)))
    labeler.model.eval()
    return rows


def _with_labels(batch):
    from dataclasses import replace

    return replace(batch, label_ids=torch.zeros_like(batch.mask, dtype=torch.long))


def lstm_rows(batch_sizes: list[int], length: int, repeats: int, peak: float) -> list[dict]:
    """The word-level BiLSTM alone (textorch's shapes: 150 inputs, 100 units per direction)."""
    rows = []
    lstm = nn.LSTM(150, 100, batch_first=True, bidirectional=True).eval()
    for batch_size in batch_sizes:
        x = torch.randn(batch_size, length, 150)

        @torch.inference_mode()
        def forward() -> None:
            lstm(x)

        flops = count_flops(lstm, forward)
        rows.append(_row(f"nn.LSTM 150->2x100 alone, batch {batch_size} x {length}", flops,
                         median_time(forward, repeats * 5), peak, batch_size * length))
    return rows


def _row(name: str, flops: int, seconds: float, peak: float, tokens: int) -> dict:
    rate = flops / seconds / 1e9
    return {"what": name, "gflop": flops / 1e9, "seconds": seconds, "gflop_per_s": rate,
            "percent_of_matmul": 100 * rate / peak, "tokens_per_s": tokens / seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--matmul-size", type=int, default=2048)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 32, 256])
    parser.add_argument("--limit", type=int, default=1000, help="eng.testb sequences used")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cache-dir", default=None, help="textorch embeddings cache")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    rates = {library: matmul_gflops(args.matmul_size, library=library) for library in ("mkl", "onednn")}
    peak = max(rate for rate in rates.values() if rate is not None)  # the ceiling: the faster product
    names = {"mkl": "torch.mm (MKL)", "onednn": "oneDNN"}
    rows = [{"what": f"matmul {args.matmul_size}x{args.matmul_size} fp32, {names[library]}", "gflop_per_s": rate,
             "percent_of_matmul": 100 * rate / peak} for library, rate in rates.items() if rate is not None]
    rows += lstm_rows(args.batch_sizes, 14, args.repeats, peak)
    labeler, data = build_tagger(args.cache_dir, args.limit)
    rows += tagger_rows(labeler, data, args.batch_sizes, args.repeats, peak)
    print_table(rows, ["what", "gflop", "seconds", "gflop_per_s", "percent_of_matmul", "tokens_per_s"])
    path = write_json("flops", {"machine": machine(), "rows": rows, "command": " ".join(sys.argv)})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
