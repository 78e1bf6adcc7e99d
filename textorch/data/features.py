"""Which GROBID feature columns feed the model's categorical feature channel.

GROBID files carry lexical columns (lower-cased token, prefixes, suffixes) with thousands of
values next to layout and shape columns with a handful. Only the latter are useful as
categorical inputs: the token itself already goes through word and character embeddings.
Counting distinct values in the training data separates the two without a per-model table:
with a limit of 32 this selects exactly the columns DeLFT's shipped ``*_FEATURES`` models use
(9-15 for date, 9-18 for the name and affiliation models).
"""

from __future__ import annotations

from textorch.data.corpus import TokenSequence
from textorch.errors import ConfigError

MAX_CATEGORICAL_VALUES = 32


def select_feature_columns(
    sequences: list[TokenSequence], n_features: int, max_values: int = MAX_CATEGORICAL_VALUES
) -> list[int]:
    """Columns whose number of distinct training values is at most ``max_values``."""
    if n_features == 0:
        return []
    distinct: list[set[str]] = [set() for _ in range(n_features)]
    for sequence in sequences:
        for token_features in sequence.features or ():
            for column, value in enumerate(token_features):
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
