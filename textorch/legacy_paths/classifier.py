"""``textorch.classifier`` now lives in ``textorch.classification.classifier``."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("textorch.classification.classifier")
