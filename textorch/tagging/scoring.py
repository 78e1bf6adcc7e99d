"""Entity counts of a tagger's predictions against gold labels, and their sum over processes.

The steps of ``SequenceLabeler.count_entities`` that need no model: the labeler decodes, these
count, so a streamed evaluation (``seq eval`` chunk by chunk) and a whole one count alike.
"""

from __future__ import annotations

import logging

from textorch.data.corpus import TokenSequence
from textorch.eval.metrics import EntityCounts, entity_labels
from textorch.tagging.prediction import Prediction
from textorch.train.dist import DistContext
from textorch.train.dist_eval import agreed_labels, reduce_counts

logger = logging.getLogger(__name__)


def count_predicted(sequences: list[TokenSequence], predictions: list[Prediction | None]) -> EntityCounts:
    """Counts over the sequences this process predicted (the others' predictions are None); a
    sequence without gold labels counts as all ``O``."""
    mine = [i for i, p in enumerate(predictions) if p is not None]
    counts = EntityCounts()
    gold = [sequences[i].labels or ["O"] * len(sequences[i]) for i in mine]
    counts.update(gold, [predictions[i].labels for i in mine])  # type: ignore[union-attr]
    return counts


def summed_counts(counts: EntityCounts, model_labels: list[str], gold_tags: set[str], ctx: DistContext) -> EntityCounts:
    """Local counts summed over the processes; ``gold_tags``: the tags of the whole gold data."""
    if ctx.world_size == 1:
        return counts
    # Gold labels of the whole data (held by every process) plus the model's own: the same
    # layout everywhere, with a slot for labels only some shard or only the gold data has.
    labels = agreed_labels(entity_labels(model_labels), entity_labels(gold_tags))
    return reduce_counts(counts, labels, ctx)


MIN_GOLD_ENTITIES_OF_A_TYPE = 3
"""A gold entity type counts towards "the data has several types" only with at least this many
entities in the validation data: a type seen once or twice may fairly go unpredicted."""


def one_type_only(counts: EntityCounts) -> str | None:
    """The single entity type a model predicts on validation data whose gold holds several
    (each with at least :data:`MIN_GOLD_ENTITIES_OF_A_TYPE` entities); None otherwise.

    Such a model gives every field the most frequent label (GROBID's ``<body>``, ``<paragraph>``,
    ``<figDesc>``): its F1 is far from 0 where that field dominates, so F1 alone would let it be
    the epoch kept."""
    gold = {label for label in counts.labels() if counts.tp.get(label, 0) + counts.fn.get(label, 0) >= MIN_GOLD_ENTITIES_OF_A_TYPE}
    predicted = {label for label in counts.labels() if counts.tp.get(label, 0) + counts.fp.get(label, 0) > 0}
    if len(gold) < 2 or len(predicted) != 1:
        return None
    return next(iter(predicted))


def epoch_choice_score(counts: EntityCounts) -> float:
    """The validation score that picks the epoch kept: entity F1, except 0 for a model that
    predicts no field or one type only where the gold data has several (:func:`one_type_only`),
    so such an epoch is never kept over one that learned the fields apart. Computed from counts
    summed over processes: every process decides alike."""
    if (only := one_type_only(counts)) is not None:
        logger.info("validation: the model predicts %s only, where the data has %d field types: scored 0, "
                    "so this epoch is not the one kept", only, len(counts.labels()))
        return 0.0
    return counts.scores()["f1"]
