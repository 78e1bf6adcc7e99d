"""``textorch.seq_runs`` now lives in ``textorch.tagging.training`` (its ``train_files`` and
``RunOutcome`` are ``train_tagger`` and ``TrainOutcome`` there: one training path)."""

import importlib
import sys

sys.modules[__name__] = importlib.import_module("textorch.tagging.training")
