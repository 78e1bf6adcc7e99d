"""Which GROBID feature columns feed the model's categorical feature channel.

GROBID files carry lexical columns (lower-cased token, prefixes, suffixes) with thousands of
values next to layout and shape columns with a handful. Only the latter are useful as
categorical inputs: the token itself already goes through word and character embeddings.
Counting distinct values in the training data separates the two without a per-model table:
with a limit of 32, or DeLFT's features vocabulary size of 12, this selects exactly the columns
DeLFT's shipped ``*_FEATURES`` models use (9-15 for date, 9-18 for the name and affiliation
models), and follows the data when a GROBID version adds or drops columns.

GROBID's own training files may give different sequences different numbers of columns (each
sequence self-consistent). Columns are indices from the left, so a detected column must be one
every sequence has, and a named column that some sequence lacks is one error naming it.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from textorch.data.corpus import Corpus, TokenSequence
from textorch.errors import ConfigError, DataError

logger = logging.getLogger(__name__)

MAX_CATEGORICAL_VALUES = 32
DELFT_FEATURES_VOCABULARY_SIZE = 12
"""DeLFT's ``features_vocabulary_size``: a column with more distinct values is not a feature."""


def _width(sequence: TokenSequence) -> int:
    """Feature columns of a sequence (the reader holds every token of a sequence to one count)."""
    return len(sequence.features[0]) if sequence.features else 0


def select_feature_columns(
    sequences: list[TokenSequence], n_features: int, max_values: int = MAX_CATEGORICAL_VALUES
) -> list[int]:
    """Columns every sequence has whose number of distinct training values is at most ``max_values``."""
    n_features = min([n_features, *(_width(s) for s in sequences if len(s))])
    if n_features <= 0:
        return []
    distinct: list[set[str]] = [set() for _ in range(n_features)]
    for sequence in sequences:
        for token_features in sequence.features or ():
            for column, value in enumerate(token_features[:n_features]):
                values = distinct[column]
                if len(values) <= max_values:
                    values.add(value)
    return [column for column, values in enumerate(distinct) if len(values) <= max_values]


def parse_columns(spec: str, n_features: int) -> list[int]:
    """Parse ``"9-15"`` or ``"9,10,12-14"`` into column indices, checked against the data."""
    columns: list[int] = []
    try:
        for part in spec.split(","):
            part = part.strip()
            if "-" in part:
                start, end = (int(x) for x in part.split("-", 1))
                columns.extend(range(start, end + 1))
            elif part:
                columns.append(int(part))
    except ValueError:
        raise ConfigError(f"--feature-columns: cannot parse {spec!r}; expected e.g. '9-15' or '9,10,12'") from None
    bad = [c for c in columns if not 0 <= c < n_features]
    if bad:
        raise ConfigError(
            f"--feature-columns: column(s) {bad} out of range; the data has feature columns 0-{n_features - 1}"
        )
    return sorted(set(columns))


def require_feature_columns(corpus: Corpus, spec: str, skip_bad_sequences: bool = False) -> Corpus:
    """``corpus`` once every sequence is known to have the columns ``spec`` names.

    A sequence with fewer columns is one error naming the first such sequence and the count, or,
    with ``skip_bad_sequences``, left out with one warning: taking another column in its place
    would train on the wrong feature.
    """
    columns = parse_columns(spec, corpus.n_features)
    if not columns:
        return corpus
    needed = columns[-1] + 1
    short = [s for s in corpus.sequences if len(s) and _width(s) < needed]
    if not short:
        return corpus
    what = (f"{len(short)} sequence(s) have fewer than the {needed} feature columns that feature columns "
            f"{spec} need (the first has {_width(short[0])})")
    if not skip_bad_sequences:
        raise DataError(corpus.path, short[0].line or None,
                        f"{what}; name columns they all have, or pass --skip-bad-sequences to train without them")
    logger.warning("%s:%d: %s: left out (--skip-bad-sequences)", corpus.path, short[0].line, what)
    dropped = {id(s) for s in short}
    return replace(corpus, sequences=[s for s in corpus.sequences if id(s) not in dropped])


def require_feature_columns_of(corpora: tuple[Corpus | None, ...], spec: str | None,
                               skip_bad_sequences: bool = False) -> tuple[Corpus | None, ...]:
    """:func:`require_feature_columns` on each corpus of a run (None stays None; no ``spec``: as they are)."""
    if not spec:
        return corpora
    return tuple(None if c is None else require_feature_columns(c, spec, skip_bad_sequences) for c in corpora)
