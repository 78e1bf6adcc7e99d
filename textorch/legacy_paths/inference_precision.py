"""``textorch.inference_precision`` now lives in ``textorch.runtime.precision``."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("textorch.runtime.precision")
