"""textorch: deep learning on text with PyTorch.

``from textorch import SequenceLabeler, TextClassifier`` gives the Python API, and
``train_sequence_labeler``, ``train_text_classifier`` train them as the commands do; all are
imported on first use so that ``import textorch`` (the CLI's ``--version``, say) does not load torch.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["SequenceLabeler", "TextClassifier", "train_sequence_labeler", "train_text_classifier", "__version__"]

_LAZY = {
    "SequenceLabeler": "textorch.tagging.labeler",
    "TextClassifier": "textorch.classification.classifier",
    "train_sequence_labeler": "textorch.tagging.training",
    "train_text_classifier": "textorch.classification.training",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'textorch' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
