"""Entity-level precision, recall and F1 for sequence labelling.

Scores are those of seqeval's default (conlleval-compatible, non-strict) mode, so numbers
reported by textorch can be compared with DeLFT's and with published results computed by
seqeval or conlleval. That includes how *invalid* tag sequences are read (``I-X`` after
``O``, ``I-Y`` after ``B-X``): a model's raw predictions are full of them, and a stricter
or looser reading would move the F1 by points, not decimals.

Counting and scoring are kept apart (:class:`EntityCounts`) because distributed
evaluation must sum *counts* over processes and compute F1 once from the sums: averaging
per-process F1 is wrong whenever processes see different numbers of entities.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the counts' tensor form serves distributed runs only; a tagging command need not import torch
    import torch

Entity = tuple[str, int, int]
"""``(label, start, end)``, token offsets with ``end`` exclusive."""

_PREFIXES = frozenset("BIES")
_CONTINUING = ("I", "E")
_OPEN = ("B", "I")
_COUNT_NAMES = ("tp", "fp", "fn")


def split_tag(tag: str) -> tuple[str, str]:
    """Split ``B-PER`` into ``("B", "PER")`` and ``O`` into ``("O", "")``.

    Only the first ``-`` separates, so labels may contain dashes and brackets
    (``B-<day>``, ``I-sub-title``). Anything else is refused rather than guessed at:
    seqeval would read a bare ``PER`` as prefix ``P`` of type ``ER`` and score garbage.
    """
    if tag == "O":
        return "O", ""
    if len(tag) > 2 and tag[1] == "-" and tag[0] in _PREFIXES:
        return tag[0], tag[2:]
    raise ValueError(f"tag {tag!r} is neither 'O' nor a B-/I-/E-/S- prefix followed by a label")


def entity_labels(tags: Iterable[str]) -> list[str]:
    """Sorted entity labels of a tag vocabulary.

    Distributed evaluation needs one label list that every process agrees on before the
    all-reduce; deriving it from the shared tag vocabulary (rather than from what each
    process happened to see) gives exactly that.
    """
    return sorted({split_tag(tag)[1] for tag in tags if tag != "O"})


def extract_entities(tags: Sequence[str]) -> list[Entity]:
    """Entities of one tag sequence, read the way conlleval and seqeval read them.

    The whole rule is: a token *continues* the open entity when its prefix is ``I`` or
    ``E``, the previous token's prefix is ``B`` or ``I``, and the labels are equal. Every
    other non-``O`` token opens a new entity, and an entity closes before any token that
    does not continue it. Hence ``O I-X`` opens X at the ``I-X``, ``B-X I-Y`` gives two
    entities, and ``B-X E-X I-X`` gives two. This is equivalent to seqeval's pair of
    start/end-of-chunk tables for the O/B/I/E/S prefixes, in one linear pass.
    """
    entities: list[Entity] = []
    open_label: str | None = None
    start = 0
    prev_prefix = "O"
    for i, tag in enumerate(tags):
        prefix, label = split_tag(tag)
        continues = prefix in _CONTINUING and prev_prefix in _OPEN and label == open_label
        if not continues:
            if open_label is not None:
                entities.append((open_label, start, i))
            open_label = None if prefix == "O" else label
            start = i
        prev_prefix = prefix
    if open_label is not None:
        entities.append((open_label, start, len(tags)))
    return entities


def _ratio(numerator: float, denominator: float) -> float:
    """Division where an empty denominator scores 0.0, as seqeval does by default."""
    return numerator / denominator if denominator else 0.0


def _prf(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    """Precision, recall, F1; F1 from P and R (not from counts) to equal seqeval to the bit."""
    precision = _ratio(tp, tp + fp)
    recall = _ratio(tp, tp + fn)
    return precision, recall, _ratio(2 * precision * recall, precision + recall)


@dataclass
class EntityCounts:
    """Sufficient statistics of entity-level scores, additive over sequences.

    A label is a key of ``tp``/``fp``/``fn`` only when its count there is positive, so two
    counts of the same data compare equal however they were accumulated (in one pass,
    merged from halves, or rebuilt from a tensor).
    """

    tp: dict[str, int] = field(default_factory=dict)
    """Per label, predicted entities that match a gold entity (same label, same span)."""
    fp: dict[str, int] = field(default_factory=dict)
    """Per label, predicted entities with no identical gold entity."""
    fn: dict[str, int] = field(default_factory=dict)
    """Per label, gold entities with no identical predicted entity."""
    n_sequences: int = 0
    n_tokens: int = 0

    def labels(self) -> list[str]:
        """Labels seen in gold or predictions: the rows seqeval would report."""
        return sorted(set(self.tp) | set(self.fp) | set(self.fn))

    def update(self, gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]) -> None:
        """Add a batch of aligned gold and predicted tag sequences.

        Entities are matched within a sequence only, which is what makes the counts
        additive (seqeval's flattening with an ``O`` between sequences gives the same).
        The batch is checked whole before anything is added, so a bad batch leaves the
        counts untouched.
        """
        if len(gold) != len(pred):
            raise ValueError(f"{len(gold)} gold sequences but {len(pred)} predicted")
        batch = {name: Counter() for name in _COUNT_NAMES}
        n_tokens = 0
        for index, (gold_tags, pred_tags) in enumerate(zip(gold, pred)):
            if len(gold_tags) != len(pred_tags):
                raise ValueError(
                    f"sequence {index}: {len(gold_tags)} gold tags but {len(pred_tags)} predicted"
                )
            gold_entities = set(extract_entities(gold_tags))
            pred_entities = set(extract_entities(pred_tags))
            batch["tp"].update(label for label, _, _ in gold_entities & pred_entities)
            batch["fp"].update(label for label, _, _ in pred_entities - gold_entities)
            batch["fn"].update(label for label, _, _ in gold_entities - pred_entities)
            n_tokens += len(gold_tags)
        for name, counter in batch.items():
            _add_into(getattr(self, name), counter)
        self.n_sequences += len(gold)
        self.n_tokens += n_tokens

    def merge(self, other: EntityCounts) -> EntityCounts:
        """Add ``other`` into these counts in place; returns ``self`` for chaining."""
        for name in _COUNT_NAMES:
            _add_into(getattr(self, name), getattr(other, name))
        self.n_sequences += other.n_sequences
        self.n_tokens += other.n_tokens
        return self

    def copy(self) -> EntityCounts:
        """An independent copy, so that ``+`` never aliases its operands' dicts."""
        return EntityCounts(
            dict(self.tp), dict(self.fp), dict(self.fn), self.n_sequences, self.n_tokens
        )

    def __add__(self, other: EntityCounts) -> EntityCounts:
        if not isinstance(other, EntityCounts):
            return NotImplemented
        return self.copy().merge(other)

    def __radd__(self, other: object) -> EntityCounts:
        """Lets ``sum(list_of_counts)`` work without an explicit start value."""
        if isinstance(other, int) and other == 0:
            return self.copy()
        return NotImplemented

    def to_tensor(self, labels: Sequence[str]) -> torch.Tensor:
        """Counts as one float64 vector ``[tp, fp, fn] * len(labels) + [n_sequences, n_tokens]``.

        One all-reduce(SUM) of this vector sums every count across processes, provided all
        processes pass the same ``labels``. float64 holds integers exactly up to 2**53.
        A label seen here but absent from ``labels`` raises rather than being dropped,
        since dropping it would silently inflate precision or recall.
        """
        missing = sorted(set(self.labels()) - set(labels))
        if missing:
            raise ValueError(f"labels {missing} were counted but are not in the tensor layout")
        if len(set(labels)) != len(labels):
            raise ValueError("tensor layout has duplicate labels")
        values: list[float] = []
        for label in labels:
            values += [float(getattr(self, name).get(label, 0)) for name in _COUNT_NAMES]
        values += [float(self.n_sequences), float(self.n_tokens)]
        import torch

        return torch.tensor(values, dtype=torch.float64)

    @classmethod
    def from_tensor(cls, t: torch.Tensor, labels: Sequence[str]) -> EntityCounts:
        """Inverse of :meth:`to_tensor` (typically after the all-reduce)."""
        expected = 3 * len(labels) + 2
        if t.dim() != 1 or t.numel() != expected:
            raise ValueError(
                f"count tensor has shape {tuple(t.shape)}, expected ({expected},) "
                f"for {len(labels)} labels"
            )
        values = [int(round(v)) for v in t.detach().cpu().tolist()]
        counts = cls(n_sequences=values[-2], n_tokens=values[-1])
        for row, label in enumerate(labels):
            for column, name in enumerate(_COUNT_NAMES):
                value = values[3 * row + column]
                if value:
                    getattr(counts, name)[label] = value
        return counts

    def scores(self) -> dict:
        """Micro-averaged and per-label scores, equal to seqeval's default mode.

        Where a denominator is zero (no predictions, no gold entities) the score is 0.0:
        seqeval's default ``zero_division="warn"`` gives the same value. We do not warn,
        since an epoch with no predicted entity is routine early in training.
        """
        per_label = {}
        for label in self.labels():
            tp, fp, fn = (getattr(self, name).get(label, 0) for name in _COUNT_NAMES)
            precision, recall, f1 = _prf(tp, fp, fn)
            per_label[label] = {
                "precision": precision,
                "recall": recall,
                "f1": f1,
                "support": tp + fn,
            }
        totals = [sum(getattr(self, name).values()) for name in _COUNT_NAMES]
        precision, recall, f1 = _prf(*totals)
        return {
            "f1": f1,
            "precision": precision,
            "recall": recall,
            "per_label": per_label,
            "n_sequences": self.n_sequences,
            "n_tokens": self.n_tokens,
        }


def _add_into(target: dict[str, int], source: dict[str, int]) -> None:
    """Add counts, keeping only positive entries (the canonical form equality relies on)."""
    for label, value in source.items():
        if value:
            target[label] = target.get(label, 0) + value


def evaluate_sequences(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]) -> dict:
    """Scores of one in-memory evaluation, for callers that need no accumulation."""
    counts = EntityCounts()
    counts.update(gold, pred)
    return counts.scores()
