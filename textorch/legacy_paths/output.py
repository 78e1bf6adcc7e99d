"""``textorch.output`` now lives in ``textorch.tagging.answer``."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("textorch.tagging.answer")
