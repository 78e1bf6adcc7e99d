"""``textorch.malloc_tuning`` now lives in ``textorch.runtime.malloc_tuning``."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("textorch.runtime.malloc_tuning")
