"""``textorch.gc_pause`` now lives in ``textorch.runtime.gc_pause``."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("textorch.runtime.gc_pause")
