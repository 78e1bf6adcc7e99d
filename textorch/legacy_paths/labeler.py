"""``textorch.labeler`` now lives in ``textorch.tagging.labeler``."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("textorch.tagging.labeler")
