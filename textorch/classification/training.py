"""Training a text classifier from the commands: the training path with ``TextClassifier`` as its class.

``cls train``/``train-eval`` call :func:`train_classifier` (files); :func:`train_classifier_on`
takes corpora already read. Both are :mod:`textorch.classification.training_path`'s functions of
the same names, which every training run goes through (``TextClassifier.train`` too), with the
class that builds and loads the models given here. The path lives apart so that the class can run
it without an import cycle.
"""

from __future__ import annotations

from functools import partial

from textorch.classification import training_path
from textorch.classification.classifier import TextClassifier

# The class bound once: the arguments, their defaults and their documentation are
# training_path's, so they are not restated here.
train_classifier = partial(training_path.train_classifier, TextClassifier)
"""``cls train`` and ``cls train-eval``: split, train (n-fold or not), score, save a
:class:`TextClassifier` (:func:`textorch.classification.training_path.train_classifier`)."""
train_classifier_on = partial(training_path.train_classifier_on, TextClassifier)
""":func:`train_classifier` on corpora already read
(:func:`textorch.classification.training_path.train_classifier_on`)."""
