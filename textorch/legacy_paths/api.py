"""``textorch.api`` now lives in ``textorch.tagging.api``."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("textorch.tagging.api")
