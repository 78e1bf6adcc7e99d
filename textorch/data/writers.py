"""Writers for tagged corpora, in the style of the file they were read from.

Predictions arrive in IOB2 (the library's only internal scheme). CoNLL output stays IOB2, the
scheme seqeval and conlleval-style tools expect; GROBID output goes back to GROBID's own
convention so that GROBID can read it as if its CRF had produced it.
"""

from __future__ import annotations

import datetime as _dt
from functools import lru_cache
from typing import TextIO

import numpy as np

from textorch import __version__

from textorch.data.corpus import Corpus, TokenSequence
from textorch.data.tags import iob2_to_grobid


def _check_alignment(corpus: Corpus, predicted: list[list[str]]) -> None:
    """A prediction that does not line up with its tokens is a bug upstream: fail loudly."""
    if len(predicted) != len(corpus.sequences):
        raise ValueError(f"{len(predicted)} predicted sequences for {len(corpus.sequences)} "
                         "input sequences")
    for index, (sequence, tags) in enumerate(zip(corpus.sequences, predicted)):
        if len(tags) != len(sequence.tokens):
            raise ValueError(f"sequence {index}: {len(tags)} predicted tags for "
                             f"{len(sequence.tokens)} tokens")


def write_conll(corpus: Corpus, predicted: list[list[str]], out: TextIO) -> None:
    """Write ``token [gold] predicted`` per line, space separated, a blank line after each sequence.

    The gold column (IOB2) is written only when the corpus has gold labels, so the output of an
    evaluation run can be scored again by any tool that compares the last two columns. Other
    input columns (POS, chunk) and document markers are not written back.
    """
    _check_alignment(corpus, predicted)
    for sequence, tags in zip(corpus.sequences, predicted):
        out.write(conll_block(sequence, tags))


def conll_block(sequence: TokenSequence, tags: list[str]) -> str:
    """One sequence as :func:`write_conll` writes it, its blank line included."""
    gold = sequence.labels
    if gold is not None:
        lines = [f"{token} {g} {p}\n" for token, g, p in zip(sequence.tokens, gold, tags)]
    else:
        lines = [f"{token} {p}\n" for token, p in zip(sequence.tokens, tags)]
    return "".join(lines) + "\n"


def write_grobid(corpus: Corpus, predicted: list[list[str]], out: TextIO) -> None:
    """Write each token's original fields then its predicted GROBID label, single-space separated.

    This is the layout GROBID produces after CRF labelling (features followed by the label), so
    its own result parsers can consume the output. Each sequence is followed by a blank line.
    """
    _check_alignment(corpus, predicted)
    for sequence, tags in zip(corpus.sequences, predicted):
        out.write(grobid_block(sequence, tags))


def grobid_block(sequence: TokenSequence, tags: list[str]) -> str:
    """One sequence as :func:`write_grobid` writes it, its blank line included."""
    labels = iob2_to_grobid(tags)
    features = sequence.features
    if features and all(features):  # each token's features joined once, by C code
        lines = [f"{token} {feats} {label}\n" for token, feats, label in zip(sequence.tokens, map(" ".join, features), labels)]
    else:
        rows = features or [[] for _ in sequence.tokens]
        lines = [" ".join([token, *feats, label]) + "\n" for token, feats, label in zip(sequence.tokens, rows, labels)]
    return "".join(lines) + "\n"


def grobid_rows_text(lines: list[str], lengths: np.ndarray, tag_ids: np.ndarray, tags: list[str],
                     drop_last_field: bool = False) -> str:
    """Sequences given as rows (:class:`textorch.data.row_chunks.RowChunk`, every sequence at
    least one line) as :func:`grobid_block` writes them: each line, its predicted GROBID label
    after a space, a blank line after each sequence. ``tag_ids`` index ``tags`` (IOB2), one per
    line; ``drop_last_field``: the lines end with a gold label, which is not written back.

    The lines are plain rows (single-space separated fields), so a line is its token and
    features joined as the block joins them. A GROBID label depends on the tag and the tag before
    it (none at a sequence's start), so each line's ending is one look-up in
    :func:`_grobid_endings`.
    """
    if drop_last_field:
        lines = [line[:line.rindex(" ")] for line in lines]
    ends = np.cumsum(lengths)
    previous_ids = np.empty_like(tag_ids)
    previous_ids[1:] = tag_ids[:-1] + 1
    previous_ids[ends - lengths] = 0  # a sequence's first line: no tag before it
    last = np.zeros(len(tag_ids), dtype=np.int64)
    last[ends - 1] = 1
    codes = (previous_ids * len(tags) + tag_ids) * 2 + last
    return "".join(map(str.__add__, lines, map(_grobid_endings(tuple(tags)).__getitem__, codes.tolist())))


@lru_cache(maxsize=16)
def _grobid_endings(tags: tuple[str, ...]) -> list[str]:
    """What follows a line with each (tag before it or none, tag, last of its sequence or not):
    the GROBID label after a space, the newline, and a blank line after a sequence's last line.
    Made once per tag set, not per chunk."""
    endings = []
    for previous in [None, *tags]:
        for tag in tags:
            label = iob2_to_grobid([tag])[0] if previous is None else iob2_to_grobid([previous, tag])[1]
            endings += [f" {label}\n", f" {label}\n\n"]
    return endings


def answer_header(model_name: str, runtime_s: float) -> dict:
    """The fields every JSON answer starts with (DeLFT's layout), for both tasks."""
    return {
        "software": "textorch",
        "version": __version__,
        "model": model_name,
        "date": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "runtime": round(runtime_s, 3),
    }
