"""Module paths of earlier releases still import and still hand out the names they had."""

from __future__ import annotations

import importlib

import pytest

OLD_NAMES = {
    "textorch.workflows": ["train_tagger", "read_for_tagging", "tag_corpus", "write_metrics", "report", "stats",
                           "set_threads", "INPUT_FORMATS", "TrainOutcome", "SequenceLabeler", "Prediction", "TASK"],
    "textorch.seq_runs": ["train_corpora", "train_files", "split_for_training", "RunOutcome", "print_outcome"],
    "textorch.classifier": ["TextClassifier", "ClsModelConfig", "ClsDataConfig", "ClsPrediction"],
    "textorch.cls_workflows": ["train_classifier", "evaluate_classifier", "ClsTrainOutcome"],
    "textorch.config": ["ModelConfig", "DataConfig", "TrainConfig"],
}


@pytest.mark.parametrize("module", sorted(OLD_NAMES))
def test_old_module_paths_keep_their_names(module: str) -> None:
    imported = importlib.import_module(module)
    missing = [name for name in OLD_NAMES[module] if not hasattr(imported, name)]
    assert not missing, f"{module} lost {missing}"
