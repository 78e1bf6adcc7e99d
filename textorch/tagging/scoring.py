"""Entity counts of a tagger's predictions against gold labels, and their sum over processes.

The steps of ``SequenceLabeler.count_entities`` that need no model: the labeler decodes, these
count, so a streamed evaluation (``seq eval`` chunk by chunk) and a whole one count alike.
"""

from __future__ import annotations

from textorch.data.corpus import TokenSequence
from textorch.eval.metrics import EntityCounts, entity_labels
from textorch.tagging.prediction import Prediction
from textorch.train.dist import DistContext
from textorch.train.dist_eval import agreed_labels, reduce_counts


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
