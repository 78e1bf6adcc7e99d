"""The Python API verbs that mirror the ``cls`` commands: ``TextClassifier.train`` and ``TextClassifier.classify``.

``build``, ``fit``, ``predict``, ``evaluate``, ``save`` and ``load`` live on the class itself;
these two are added through a mixin, as for ``SequenceLabeler``, and run what the commands run:
``train`` is :func:`textorch.classification.training.train_classifier` (files) or
:func:`~textorch.classification.training.train_classifier_on` (corpora), ``classify`` answers
with ``cls classify``'s document, which the server also answers.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from textorch.classification.config import ClsDataConfig, ClsModelConfig
from textorch.data.cls_readers import ClsCorpus
from textorch.errors import DataError
from textorch.train.config import TrainConfig, sort_options

if TYPE_CHECKING:  # imported for annotations only: classifier.py imports this module
    from textorch.classification.classifier import TextClassifier


class ClassifierAPI:
    """``train`` and ``classify`` for :class:`~textorch.classification.classifier.TextClassifier`."""

    @classmethod
    def train(
        cls,
        train: str | Path | ClsCorpus,
        valid: str | Path | ClsCorpus | None = None,
        architecture: str | None = None,
        embeddings: str = ClsDataConfig.embeddings,
        output: str | Path | None = None,
        *,
        device: str = "cpu",
        cache_dir: str | None = None,
        **options: Any,
    ) -> "TextClassifier":
        """Train a classifier (an ensemble with ``fold_count=N``), as ``textorch cls train`` does.

        Args:
            train: labelled CSV/TSV/JSONL file (or a shared corpus), or a :class:`ClsCorpus` already read.
            valid: validation data for early stopping; None holds out ``valid_fraction`` of
                ``train`` (stratified, seeded), as the CLI does.
            architecture: a name from ``textorch cls architectures``; None: ``bert`` with a
                ``transformer`` option, else the default.
            embeddings: registry name or path of word vectors, or ``"none"``.
            output: model directory to write.
            **options: any field of ``ClsModelConfig``, ``TrainConfig`` or ``ClsDataConfig``.

        Returns:
            The trained classifier; ``fold_reports`` holds each member's training.
        """
        from textorch.classification import training
        from textorch.classification.classify_files import read_labelled
        from textorch.train.dist import DistContext, resolve_device

        if architecture is None:
            architecture = "bert" if options.get("transformer") else ClsModelConfig.architecture
        configs = sort_options({**options, "architecture": architecture, "embeddings": embeddings},
                               (ClsModelConfig, TrainConfig, ClsDataConfig))
        device = str(resolve_device(device, DistContext()))
        out = None if output is None else str(output)
        if isinstance(train, (str, Path)) and (valid is None or isinstance(valid, (str, Path))):
            outcome = training.train_classifier(str(train), out, *configs, valid_path=None if valid is None else str(valid),  # type: ignore[arg-type]
                                                device=device, cache_dir=cache_dir)
        else:
            data_config = configs[2]
            if not isinstance(train, ClsCorpus):
                train = read_labelled(str(train), data_config)  # type: ignore[arg-type]
            if valid is not None and not isinstance(valid, ClsCorpus):
                valid = read_labelled(str(valid), data_config)  # type: ignore[arg-type]
            outcome = training.train_classifier_on(train, out, *configs, valid=valid, device=device,  # type: ignore[arg-type]
                                                   cache_dir=cache_dir)
        return outcome.classifier  # type: ignore[return-value]

    def classify(
        self: "TextClassifier",  # type: ignore[misc]
        texts: Sequence[str],
        batch_size: int = 64,
        model_name: str | None = None,
    ) -> dict:
        """Class scores of each text, in the JSON structure of ``cls classify`` and ``POST /classify``:
        ``{"software", "version", "model", "date", "runtime", "classes", "multi_label",
        "classifications": [{"text", "scores", "labels"}]}``."""
        from textorch.classification.classify_files import texts_document

        if isinstance(texts, (str, bytes)) or not all(isinstance(text, str) for text in texts):
            raise DataError("texts", None, "expected a list of strings")
        started = time.perf_counter()
        predictions = self.predict(list(texts), batch_size)
        runtime = time.perf_counter() - started
        return texts_document(model_name or self.model_config.architecture, self, list(texts), predictions, runtime)
