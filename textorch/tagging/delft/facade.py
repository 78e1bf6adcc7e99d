"""DeLFT's ``Sequence``, as GROBID uses it, over a textorch :class:`SequenceLabeler`.

GROBID creates one ``Sequence`` per model, ``load``s it, sets ``model_config.max_sequence_length``
and ``batch_size``, then calls ``tag(x_all, None[, features=f_all])`` for every document and
expects ``[token, label]`` pairs with DeLFT's labels (``B-<date>``, ``I-<date>``, ``O``). ``load``
opens the model as every door does (:func:`textorch.tagging.opening.open_tagger`, the default
engine: on the CPU GROBID's small calls run in ONNX Runtime, exported into the model directory
on first use), and each call goes to ``SequenceLabeler.predict``, the path of the server. See
docs/grobid.md for what differs from DeLFT.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence as Listing
from pathlib import Path

from textorch.data.corpus import Corpus, TokenSequence
from textorch.data.features import require_feature_columns
from textorch.data.splits import cut_long_sequences
from textorch.data.tags import conll_tag_error
from textorch.data.tokenize import tokenize
from textorch.errors import ConfigError, DataError, ModelFormatError, TextorchError
from textorch.models.architecture_table import get_architecture
from textorch.tagging.answer import tagging_document
from textorch.tagging.delft.options import (
    DelftModelConfig,
    model_config_from,
    textorch_configs,
)
from textorch.tagging.delft.progress import training_progress
from textorch.onnx.opening import EngineOptions
from textorch.tagging.labeler import Prediction, SequenceLabeler
from textorch.tagging.opening import open_tagger

logger = logging.getLogger(__name__)

DEFAULT_MODELS_DIR = "data/models/sequenceLabelling/"
"""DeLFT's default ``dir_path`` of ``load`` and ``save``."""


class Sequence:
    """A sequence-labelling model under DeLFT's names: construct, ``load`` or ``train``, ``tag``, ``save``."""

    def __init__(self, model_name: str | None = None, architecture: str | None = None,
                 embeddings_name: str | None = None, **options: object) -> None:
        self.registry = options.get("resource_registry_path")
        self.model_config: DelftModelConfig = model_config_from(
            model_name, architecture, {"embeddings_name": embeddings_name, **options})
        self.labeler: SequenceLabeler | None = None
        self.model_dir: Path | None = None
        """The directory the model was loaded from or saved to (what incremental training continues)."""
        self.load_error: str | None = None
        """Why the last ``load`` failed: GROBID never reads that exception, so every later call repeats it."""

    # ------------------------------------------------------------------ loading and saving
    def load(self, dir_path: str | Path = DEFAULT_MODELS_DIR, weight_file: str | None = None) -> None:
        """Load ``<dir_path>/<model_name>/``, or ``dir_path`` itself when it is the model directory.

        A DeLFT model directory is converted first (see :func:`textorch.tagging.delft_import.importer.converted_dir`).
        A failure is also logged, once: GROBID's JEP thread pool drops the exception itself.
        """
        try:
            if not isinstance(dir_path, (str, os.PathLike)):
                raise ConfigError(f"Sequence.load(dir_path={dir_path!r}): expected the models' folder (a str or a Path)")
            self._load(dir_path)
        except (TextorchError, OSError) as exc:
            self.load_error = str(exc)
            logger.error("load() of %r failed: %s", self.model_config.model_name, exc)
            raise
        self.load_error = None

    def _load(self, dir_path: str | Path) -> None:
        name = self.model_config.model_name
        directory = Path(dir_path) / name
        if not directory.is_dir():
            directory = Path(dir_path)
        if not (directory / "config.json").is_file():
            raise ModelFormatError(f"no model {name!r}: neither {Path(dir_path) / name} nor {dir_path} "
                                   "is a model directory")
        from textorch.train.dist import DistContext, resolve_device

        # The default engine, as every door: ONNX Runtime for GROBID's small calls on the CPU.
        options = EngineOptions(device=resolve_device("auto", DistContext()))
        self.labeler = open_tagger(directory, options).predictor
        self.model_dir = directory
        self._describe(self.labeler)

    def save(self, dir_path: str | Path = DEFAULT_MODELS_DIR, weight_file: str | None = None) -> None:
        """Write the model to ``<dir_path>/<model_name>/``, as DeLFT does."""
        target = Path(dir_path) / self.model_config.model_name
        self._loaded().save(target)
        self.model_dir = target
        logger.info("model saved to %s", target)

    def _describe(self, labeler: SequenceLabeler) -> None:
        """``model_config`` attributes from the model itself (the DeLFT names GROBID may read)."""
        config = self.model_config
        config.architecture = labeler.model_config.architecture
        config.transformer_name = labeler.model_config.transformer
        config.features_indices = list(labeler.encoder.feature_columns) or None
        embeddings = labeler.data_config.embeddings
        config.embeddings_name = None if embeddings == "none" else config.embeddings_name or embeddings

    def _loaded(self) -> SequenceLabeler:
        if self.labeler is None:
            cause = f" (load() failed: {self.load_error})" if self.load_error else ""
            raise OSError(f"Could not find a model: call load() or train() on {self.model_config.model_name!r} "
                          f"first{cause}")
        return self.labeler

    # ------------------------------------------------------------------ tagging
    def tag(self, texts: Listing, output_format: str | None = None, features: Listing | None = None,
            batch_size: int | None = None, multi_gpu: bool = False) -> list | dict:
        """Labels of each text: ``[[token, label], ...]`` per text, or DeLFT's JSON for ``"json"``.

        ``texts`` are token lists (GROBID's ``x_all``) or strings, tokenised here. Sequences longer
        than ``model_config.max_sequence_length`` are tagged in consecutive pieces of that length
        (DeLFT cut them short instead); every token gets a label.
        """
        labeler = self._loaded()
        if output_format not in (None, "json"):
            raise ConfigError(f"tag(output_format={output_format!r}): use None or 'json'")
        if batch_size is not None:
            self.model_config.batch_size = batch_size
        sequences, pretokenised = self._sequences(texts, features, labeler)
        started = time.perf_counter()
        predictions = self._predict(labeler, sequences, with_scores=output_format == "json")
        if output_format == "json":
            return tagging_document(self.model_config.model_name, sequences, predictions, time.perf_counter() - started,
                                    labeler.input_format if pretokenised else None)
        return [[[token, label] for token, label in zip(s.tokens, p.labels)] for s, p in zip(sequences, predictions)]

    def _predict(self, labeler: SequenceLabeler, sequences: list[TokenSequence], with_scores: bool) -> list[Prediction]:
        limit = max(int(self.model_config.max_sequence_length or 0), 0)
        pieces = cut_long_sequences(sequences, limit)
        found = labeler.predict(pieces, batch_size=max(int(self.model_config.batch_size or 1), 1),
                                with_scores=with_scores)
        if len(pieces) == len(sequences):
            return found
        joined, at = [], 0
        for sequence in sequences:
            count = max(1, -(-len(sequence) // limit))
            parts = found[at:at + count]
            at += count
            scores = None if not with_scores else [x for p in parts for x in p.scores or ()]
            joined.append(Prediction([x for p in parts for x in p.labels], scores))
        return joined

    @staticmethod
    def _sequences(texts: Listing, features: Listing | None,
                   labeler: SequenceLabeler) -> tuple[list[TokenSequence], bool]:
        """Token sequences, with the feature columns the model reads when it reads any."""
        if isinstance(texts, (str, bytes)) or not isinstance(texts, Listing):
            raise DataError("texts", None, "expected a list of token lists or of strings")
        columns = labeler.encoder.feature_columns
        if columns and features is None:
            raise ConfigError(f"this model reads feature columns {list(columns)}: call tag(texts, None, features=...) "
                              "(GROBID does for *_FEATURES architectures)")
        if columns and not _a_list(features):
            raise DataError("features", None, f"expected a list of feature sequences, got {type(features).__name__}")
        if columns and len(features) != len(texts):
            raise DataError("features", None, f"{len(features)} feature sequences for {len(texts)} texts")
        sequences = []
        pretokenised = False
        for i, text in enumerate(texts):
            if isinstance(text, str):
                tokens, offsets = tokenize(text)
                sequences.append(TokenSequence(tokens, offsets=offsets, text=text))
                continue
            pretokenised = True
            tokens = _tokens(text, f"texts[{i}]")
            rows = _feature_rows(features[i], len(tokens), max(columns) + 1, i) if columns else None
            sequences.append(TokenSequence(tokens, features=rows))
        return sequences, pretokenised

    # ------------------------------------------------------------------ training and evaluation
    def train(self, x_train: Listing, y_train: Listing, f_train: Listing | None = None, x_valid: Listing | None = None,
              y_valid: Listing | None = None, f_valid: Listing | None = None, incremental: bool = False,
              callbacks: object = None, multi_gpu: bool = False) -> None:
        """Train on token lists and DeLFT labels, in DeLFT 1.2.0's argument order.

        GROBID's in-process training passes ``x_valid, y_valid`` third and fourth (DeLFT 0.x's
        order): a third argument made of token lists is read that way, never as features.
        ``incremental=True`` continues the model ``load`` read.
        """
        if callbacks or multi_gpu:
            raise ConfigError("Sequence.train(callbacks=..., multi_gpu=...): not available in textorch "
                              "(several GPUs: 'textorch grobid MODEL train --devices N')")
        for name, value in (("x_train", x_train), ("y_train", y_train)):
            if not _a_list(value):
                raise DataError(name, None, f"expected a list of {'token' if name[0] == 'x' else 'label'} sequences, "
                                            f"got {type(value).__name__}")
        if _kind(f_train) == "tokens":
            if y_valid is not None or f_valid is not None:
                raise ConfigError("Sequence.train: the third argument holds tokens, not features; pass features "
                                  "as f_train=... and validation data as x_valid=..., y_valid=...")
            f_train, x_valid, y_valid = None, f_train, x_valid
        model, train_config, data = textorch_configs(self.model_config, self.registry)
        uses_features = get_architecture(model.architecture).features
        if uses_features and f_train is None:
            raise ConfigError(f"{model.architecture} reads feature columns: pass f_train (and f_valid)")
        train = _corpus(x_train, y_train, f_train if uses_features else None, "x_train")
        valid = None
        if x_valid is not None and len(x_valid):
            valid = _corpus(x_valid, y_valid, f_valid if uses_features else None, "x_valid")
        if data.feature_columns:
            train = require_feature_columns(train, data.feature_columns)
            valid = require_feature_columns(valid, data.feature_columns) if valid is not None else None
        if incremental and self.model_dir is None:
            raise ConfigError("Sequence.train(incremental=True) continues a saved model: call load() first")
        from textorch.tagging.training import train_corpora
        from textorch.train.dist import DistContext, resolve_device

        with training_progress():
            outcome = train_corpora(train, None, model, train_config, data, valid,
                                    input_model=str(self.model_dir) if incremental else None,
                                    device=resolve_device("auto", DistContext()))
        self.labeler = outcome.labeler
        self._describe(self.labeler)

    def eval(self, x_test: Listing, y_test: Listing, features: Listing | None = None) -> dict:
        """Entity-level scores on labelled data, printed as DeLFT prints them, and returned."""
        from textorch.eval.entity_report import format_report

        labeler = self._loaded()
        corpus = _corpus(x_test, y_test, features if labeler.encoder.feature_columns else None, "x_test")
        scores = labeler.count_entities(corpus.sequences, batch_size=max(int(self.model_config.batch_size), 1)).scores()
        print(format_report(scores))
        return scores


def _kind(value: Listing | None) -> str | None:
    """``tokens`` (a list of token lists), ``features`` (lists of per-token lists), or None."""
    if value is None or isinstance(value, (str, bytes)):
        return None
    for item in value:
        if len(item):
            return "tokens" if isinstance(item[0], str) else "features"
    return None


def _a_list(value: object) -> bool:
    """A sequence of items (a list, a tuple...), not a string, bytes or None."""
    return isinstance(value, Listing) and not isinstance(value, (str, bytes, bytearray))


def _tokens(text: object, where: str) -> list[str]:
    """A pre-tokenised text's tokens as strings; bytes (``str()`` made ``"b'June'"`` of them) and
    None are refused naming the place, as is a text that is not a list of tokens."""
    if not _a_list(text):
        raise DataError(where, None, f"expected a list of tokens or a string, got {type(text).__name__}")
    for j, token in enumerate(text):  # type: ignore[arg-type]
        if token is None or isinstance(token, (bytes, bytearray)):
            raise DataError(f"{where}[{j}]", None, f"a token must be a str, got {type(token).__name__} {token!r}"
                                                   + (" (decode it first)" if token is not None else ""))
    return [str(token) for token in text]  # type: ignore[union-attr]


def _feature_rows(rows: Listing, n_tokens: int, needed: int, index: int) -> list[list[str]]:
    """One sequence's feature lists, checked: one per token, each with the columns the model reads."""
    if not _a_list(rows):
        raise DataError(f"features[{index}]", None, f"expected a list of per-token feature lists, got {type(rows).__name__}")
    if len(rows) != n_tokens:
        raise DataError(f"features[{index}]", None, f"{len(rows)} feature lists for {n_tokens} tokens")
    bad = next((j for j, row in enumerate(rows) if not _a_list(row)), None)
    if bad is not None:
        raise DataError(f"features[{index}][{bad}]", None, f"expected a list of feature values, got {type(rows[bad]).__name__}")
    out = [[str(value) for value in row] for row in rows]
    short = next((j for j, row in enumerate(out) if len(row) < needed), None)
    if short is not None:
        raise DataError(f"features[{index}][{short}]", None,
                        f"{len(out[short])} feature columns, but the model reads column {needed - 1}")
    return out


def _corpus(tokens: Listing, labels: Listing | None, features: Listing | None, name: str) -> Corpus:
    """A labelled GROBID-style corpus from DeLFT's lists; sequence ``i`` is at ``name:i+1`` in messages."""
    if labels is None or len(labels) != len(tokens):
        raise DataError(name, None, f"{len(tokens)} token sequences but {0 if labels is None else len(labels)} label sequences")
    if features is not None and len(features) != len(tokens):
        raise DataError(name, None, f"{len(tokens)} token sequences but {len(features)} feature sequences")
    sequences = []
    for i, (words, tags) in enumerate(zip(tokens, labels)):
        words = _tokens(words, f"{name}[{i}]")
        if not _a_list(tags):
            raise DataError(name, i + 1, f"expected a list of labels, got {type(tags).__name__}")
        if len(words) != len(tags):
            raise DataError(name, i + 1, f"{len(words)} tokens but {len(tags)} labels")
        for tag in tags:
            if (error := conll_tag_error(str(tag))) is not None:
                raise DataError(name, i + 1, error)
        rows = None
        if features is not None:
            if len(features[i]) != len(words):
                raise DataError(name, i + 1, f"{len(words)} tokens but {len(features[i])} feature lists")
            rows = [[str(value) for value in row] for row in features[i]]
        sequences.append(TokenSequence(words, [str(t) for t in tags], features=rows, line=i + 1))
    width = max((len(s.features[0]) for s in sequences if s.features), default=0)
    return Corpus(sequences, "grobid", path=name, n_features=width)
