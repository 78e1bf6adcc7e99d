"""``textorch.workflows``: its training half now lives in ``textorch.tagging.training``, its
tagging half in ``textorch.tagging.tag_files``; this module hands out both under the old name."""

from textorch.data.readers import read_labelled  # noqa: F401
from textorch.eval.entity_report import format_report as report  # noqa: F401
from textorch.tagging.labeler import TASK, Prediction, SequenceLabeler  # noqa: F401
from textorch.tagging.tag_files import INPUT_FORMATS, read_for_tagging, set_threads, stats, tag_corpus  # noqa: F401
from textorch.tagging.training import TrainOutcome, train_tagger, write_metrics  # noqa: F401
