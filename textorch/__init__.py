"""textorch: deep learning on text with PyTorch.

``from textorch import SequenceLabeler, TextClassifier`` gives the Python API; they are imported
on first use so that ``import textorch`` (the CLI's ``--version``, say) does not load torch.
"""

from __future__ import annotations

import os as _os

__version__ = "0.1.0"

__all__ = ["SequenceLabeler", "TextClassifier", "__version__"]

# Old module paths (``textorch.config``, ``textorch.classifier``...) resolve through one file each
# in legacy_paths/, searched after the package's own folder.
__path__.append(_os.path.join(_os.path.dirname(__file__), "legacy_paths"))

_LAZY = {"SequenceLabeler": "textorch.tagging.labeler", "TextClassifier": "textorch.classification.classifier"}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'textorch' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
