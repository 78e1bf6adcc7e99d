"""``textorch.seq_runs`` now lives in ``textorch.tagging.run_files``."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("textorch.tagging.run_files")
