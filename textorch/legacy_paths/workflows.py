"""``textorch.workflows`` now lives in ``textorch.tagging.runs``."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("textorch.tagging.runs")
