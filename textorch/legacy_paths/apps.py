"""``textorch.apps`` now lives in ``textorch.tagging.presets``."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("textorch.tagging.presets")
