"""``textorch.models.packed_lstm`` now lives in ``textorch.models.onednn_lstm`` ("packed" is kept
for PyTorch's PackedSequence); ``packed_lstm_available`` is its ``laid_out_lstm_available``."""

import importlib
import sys

_module = importlib.import_module("textorch.models.onednn_lstm")
_module.packed_lstm_available = _module.laid_out_lstm_available
sys.modules[__name__] = _module
