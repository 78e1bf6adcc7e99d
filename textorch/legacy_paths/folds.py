"""``textorch.folds`` now lives in ``textorch.tagging.folds``."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("textorch.tagging.folds")
