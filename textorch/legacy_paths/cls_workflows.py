"""``textorch.cls_workflows``: its training half now lives in ``textorch.classification.training``,
its reading and classifying half in ``textorch.classification.classify_files``; this module hands
out both under the old name."""

from textorch.classification.classifier import TASK, ClsDataConfig, ClsModelConfig, ClsPrediction, TextClassifier  # noqa: F401
from textorch.classification.classify_files import (  # noqa: F401
    classification_document,
    classify_texts,
    evaluate_classifier,
    read_for_classification,
    read_labelled,
    write_json,
)
from textorch.classification.training import ClsTrainOutcome, train_classifier  # noqa: F401
