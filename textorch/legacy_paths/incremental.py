"""``textorch.incremental`` now lives in ``textorch.tagging.incremental``."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("textorch.tagging.incremental")
