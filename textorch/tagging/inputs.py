"""What the front door reads: texts or token lists to tag, corpora to train on or to score.

Apart from :class:`~textorch.tagging.labeler.SequenceLabeler` so that the HTTP server reads a
request with the same code as ``SequenceLabeler.tag`` (:func:`to_sequences`), and the training
path reads a corpus from a path or a corpus given (:func:`as_corpus`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from textorch.data.corpus import Corpus, TokenSequence
from textorch.data.tokenize import tokenize
from textorch.errors import ConfigError, DataError

Token = str | Sequence[str]
"""A bare token, or ``[token, feature, ...]`` as GROBID sends it."""


def as_corpus(source: str | Path | Corpus, data_format: str | None) -> Corpus:
    """A labelled corpus: ``source`` itself, or the file it names read in ``data_format``
    (None: guessed from the file)."""
    if isinstance(source, Corpus):
        return source
    from textorch.data.readers import read_labelled

    return read_labelled(source, data_format)


def read_evaluation_corpus(source: str | Path | Corpus, input_format: str) -> Corpus:
    """A labelled corpus to score a model on, read in the model's own format when it has one;
    a sequence without labels is a :class:`ConfigError` naming its line."""
    corpus = as_corpus(source, input_format if input_format in ("conll", "grobid") else None)
    missing = [s.line for s in corpus.sequences if s.labels is None]
    if missing:
        raise ConfigError(f"{corpus.path}: evaluation needs labelled data (no labels at line {missing[0]})")
    return corpus


def to_sequences(
    texts: object, n_features: int, needs_features: bool, where: str = "texts"
) -> tuple[list[TokenSequence], bool]:
    """Token sequences from strings or token lists, and whether the input was pre-tokenised.

    Every malformed item is a :class:`DataError` naming its position (``texts[3][2]``), so a
    server can answer 422 with a message the client can act on.
    """
    if isinstance(texts, (str, bytes)) or not isinstance(texts, Sequence):
        raise DataError(where, None, f"expected a list of texts or of token lists, got {type(texts).__name__}")
    if not texts:
        return [], False
    if all(isinstance(text, str) for text in texts):
        sequences = []
        for text in texts:
            tokens, offsets = tokenize(text)  # type: ignore[arg-type]
            sequences.append(TokenSequence(tokens, offsets=offsets, text=text))  # type: ignore[arg-type]
        return sequences, False
    sequences = [_token_sequence(item, n_features, needs_features, f"{where}[{i}]") for i, item in enumerate(texts)]
    return sequences, True


def _token_sequence(item: object, n_features: int, needs_features: bool, where: str) -> TokenSequence:
    if isinstance(item, str) or not isinstance(item, Sequence):
        raise DataError(where, None, "expected a list of tokens (do not mix texts and token lists)")
    tokens: list[str] = []
    features: list[list[str]] = []
    for j, token in enumerate(item):
        if isinstance(token, str):
            if needs_features:
                raise DataError(f"{where}[{j}]", None, f"the model needs {n_features} features per token: "
                                "send [token, feature, ...]")
            tokens.append(token)
            features.append([])
            continue
        if isinstance(token, (bytes, dict)) or not isinstance(token, Sequence) or not token:
            raise DataError(f"{where}[{j}]", None, "a token is a string or a non-empty list [token, feature, ...]")
        if not all(isinstance(value, str) for value in token):
            raise DataError(f"{where}[{j}]", None, "token and features must be strings")
        if len(token) - 1 != n_features:
            expected = (f"the token and {n_features} features" if n_features
                        else "the token alone (this model takes no features)")
            raise DataError(f"{where}[{j}]", None, f"expected {expected}, found {len(token) - 1} features")
        tokens.append(token[0])
        features.append(list(token[1:]))
    has_features = n_features > 0 and any(features)
    return TokenSequence(tokens, features=features if has_features else None)
