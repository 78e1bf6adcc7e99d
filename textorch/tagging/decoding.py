"""One tagging call's batches through the network, to labels and scores per sequence, and what
chooses the network's runner and routes.

Apart from :class:`~textorch.tagging.labeler.SequenceLabeler`, which decides the route of a call
(its CPU routes, :func:`textorch.models.cpu_routes.decide`; batches, their share per process) and
then runs its batches here, under those routes.
"""

from __future__ import annotations

import torch

from textorch.models.costs import batch_precision
from textorch.models.embedders import rows_encoder
from textorch.models.one_sequence import OneSequenceTagger
from textorch.runtime.precision import inference_autocast
from textorch.tagging.encoded import EncodedData
from textorch.tagging.prediction import Prediction
from textorch.train.dist import DistContext


def decode_batches(
    network: object, data: EncodedData, batches: list[list[int]], token_vectors: torch.Tensor | None,
    precision: str, device: torch.device, label_items: list[str], with_scores: bool, char_rows: bool,
) -> list[tuple[int, Prediction]]:
    """``(index, prediction)`` of each sequence of ``batches``, decoded batch by batch by
    ``network`` (the model, or a runner with its ``decode`` contract). ``char_rows``: batches carry
    distinct-token rows (an ONNX runner reads char_ids itself: no rows to prepare for it)."""
    lengths = data.lengths()
    on_cpu = device.type == "cpu"  # batches are built there: no copy to make
    decoded: list[tuple[int, Prediction]] = []
    for indices in batches:
        batch = data.batch(indices, token_vectors, char_rows=char_rows)
        if not on_cpu:
            batch = batch.to(device)
        with inference_autocast(batch_precision(precision, len(indices)), device):
            paths, scores = network.decode(batch, with_scores=with_scores)  # type: ignore[attr-defined]
        # Whole-batch lists, then slices: row-by-row NumPy conversions cost twice as much.
        path_rows = (paths.cpu().numpy() if isinstance(paths, torch.Tensor) else paths).tolist()
        score_rows = None
        if with_scores:
            score_rows = (scores.float().cpu().numpy() if isinstance(scores, torch.Tensor) else scores).tolist()
        for row, index in enumerate(indices):
            n = lengths[index]
            row_scores = None if score_rows is None else score_rows[row][:n]
            decoded.append((index, Prediction([label_items[k] for k in path_rows[row][:n]], row_scores)))
    return decoded


def one_sequence_in_runner(runner: object | None, data: EncodedData, label_items: list[str], with_scores: bool,
                           ctx: DistContext | None = None) -> Prediction | None:
    """The prediction of a call of one non-empty sequence by the runner that ``runner`` picks for
    it (:func:`runner_for`) where that is ONNX Runtime, fed straight from the sequence's arrays;
    None where this does not serve (PyTorch runs the call, several sequences or processes, an
    empty sequence, a transformer's windows, a runner without ``decode_one``)."""
    if len(data.encoded) != 1 or not len(data.encoded[0]) or data.windows is not None:
        return None
    length = len(data.encoded[0])
    decode_one = getattr(runner_for(runner, length, length), "decode_one", None)
    if decode_one is None or (ctx is not None and ctx.world_size > 1):
        return None
    paths, scores = decode_one(data.encoded[0], data.word_table, with_scores)
    return Prediction([label_items[k] for k in paths[0].tolist()], None if scores is None else scores[0].tolist())


def runner_for(runner: object | None, n_tokens: int, longest: int) -> object | None:
    """What runs the network for a call of ``n_tokens`` tokens whose longest sequence has
    ``longest``: ``runner``, or under ``--engine auto`` (:class:`textorch.onnx.engine.AutoRunner`)
    its choice; None: PyTorch."""
    choose = getattr(runner, "runner_for", None)
    return choose(n_tokens, longest) if choose is not None else runner


class ModelRoutes:
    """A model's character encoder and one-sequence route, found once per model object (a
    labeler's model may be replaced): a module walk costs more than a one-sequence call can spare."""

    def __init__(self) -> None:
        self._found: tuple[torch.nn.Module, torch.nn.Module | None, OneSequenceTagger | None] | None = None

    def of(self, model: torch.nn.Module) -> tuple[torch.nn.Module | None, OneSequenceTagger | None]:
        """``model``'s character encoder (None: it has none) and one-sequence route (None: not served)."""
        found = self._found
        if found is None or found[0] is not model:
            encoder = rows_encoder(model)
            found = self._found = (model, encoder, OneSequenceTagger.of(model, encoder))  # one assignment
        return found[1], found[2]
