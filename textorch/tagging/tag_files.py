"""Tagging files with a saved tagger: read the input (text, CoNLL or GROBID), tag it, time it.

``seq tag`` and ``grobid ... tag`` go through these; the answer itself is
:meth:`SequenceLabeler.predict`'s, the one inference path of the library and the server.
"""

from __future__ import annotations

import gzip
import time

import torch

from textorch.data.corpus import Corpus
from textorch.data.readers import read_conll, read_grobid, read_text
from textorch.data.tags import is_grobid_label
from textorch.errors import ConfigError
from textorch.tagging.labeler import Prediction, SequenceLabeler
from textorch.train.dist import DistContext

INPUT_FORMATS = ("text", "conll", "grobid")


def read_for_tagging(path: str, input_format: str, labeler: SequenceLabeler) -> Corpus:
    """Read input to tag; a gold label column in CoNLL/GROBID input is recognised and ignored."""
    if input_format not in INPUT_FORMATS:
        raise ConfigError(f"unknown --input-format {input_format!r}; choose one of: {', '.join(INPUT_FORMATS)}")
    if input_format == "text":
        return read_text(path)
    if input_format == "grobid":
        return read_grobid(path, labelled=False, n_features=_grobid_width(path, labeler))
    return read_conll(path, labelled=False)


def _grobid_width(path: str, labeler: SequenceLabeler) -> int:
    """The feature columns of GROBID input: the model's count, or, for a GROBID model that reads
    no feature column and records no count (one imported from DeLFT, which never saw the data),
    the input's own, from its first line (a last field shaped ``I-<x>`` or ``<x>`` is a gold
    label). Columns the model does not read are read and ignored."""
    if labeler.n_features or labeler.encoder.feature_columns or labeler.input_format != "grobid":
        return labeler.n_features
    fields = _first_fields(path)
    return max(len(fields) - (2 if len(fields) > 1 and is_grobid_label(fields[-1]) else 1), 0)


def _first_fields(path: str) -> list[str]:
    """The fields of the first non-blank line; none when unreadable (the reader then names the problem)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8", errors="replace") as lines:
            return next((line.split() for line in lines if line.strip()), [])
    except OSError:
        return []


def tag_corpus(
    labeler: SequenceLabeler, corpus: Corpus, batch_size: int, ctx: DistContext | None = None,
    with_scores: bool = True,
) -> tuple[list[Prediction], float]:
    """Predictions and the time of the tagging itself (sequences in memory to labels).

    ``batch_size`` is per process; with several processes each tags its share and every
    process receives all predictions in input order. ``with_scores=False`` when nothing will
    read the confidences (CoNLL and GROBID output): a CRF then skips its forward-backward pass.
    """
    started = time.perf_counter()
    predictions = labeler.predict(corpus.sequences, batch_size=batch_size, ctx=ctx, with_scores=with_scores)
    return predictions, time.perf_counter() - started



def stats(corpus: Corpus, load_s: float, tag_s: float) -> dict:
    n_tokens = sum(len(s) for s in corpus.sequences)
    return {
        "n_sequences": len(corpus.sequences),
        "n_tokens": n_tokens,
        "load_s": round(load_s, 6),
        "tag_s": round(tag_s, 6),
        "tokens_per_s": round(n_tokens / tag_s, 1) if tag_s > 0 else None,
    }


def set_threads(threads: int | None) -> None:
    if threads:
        torch.set_num_threads(threads)
