"""``textorch.config`` now lives in ``textorch.tagging.config``."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("textorch.tagging.config")
