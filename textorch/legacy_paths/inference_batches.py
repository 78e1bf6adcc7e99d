"""``textorch.inference_batches`` now lives in ``textorch.models.inference_batches``."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("textorch.models.inference_batches")
