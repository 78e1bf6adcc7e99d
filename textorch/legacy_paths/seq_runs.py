"""``textorch.seq_runs``: now ``textorch.tagging.training``, where one path does what its
``train_files``/``train_corpora`` and ``workflows.train_tagger`` did apart."""

from textorch.eval.entity_report import format_report as report  # noqa: F401
from textorch.tagging.training import (  # noqa: F401
    TrainOutcome,
    print_outcome,
    split_for_training,
    train_corpora,
    train_tagger,
    write_metrics,
)

RunOutcome = TrainOutcome
"""The n-fold/incremental outcome, a class of its own before both outcomes were one."""

train_files = train_tagger
"""Files to :func:`train_corpora`: what ``train_tagger`` does now for every training mode."""
