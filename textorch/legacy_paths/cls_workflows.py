"""``textorch.cls_workflows`` now lives in ``textorch.classification.runs``."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("textorch.classification.runs")
