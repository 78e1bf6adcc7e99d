"""The Python API verbs that mirror the CLI: ``SequenceLabeler.train`` and ``SequenceLabeler.tag``.

``build``, ``fit``, ``predict``, ``evaluate``, ``save`` and ``load`` live on the class itself;
the two verbs here are added through a small mixin so that ``labeler.py``, which several people
edit, only gains a base class. The HTTP server uses the same helpers (:func:`to_sequences` to
read input, :func:`tagging_answer` to build the answer) around the same ``predict`` call, so
the library, the CLI and the server share one inference path.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from textorch.tagging.config import DataConfig, ModelConfig, TrainConfig
from textorch.train.config import sort_options
from textorch.data.corpus import Corpus, TokenSequence
from textorch.data.tokenize import tokenize
from textorch.errors import DataError

if TYPE_CHECKING:  # imported for annotations only: labeler.py imports this module
    from textorch.tagging.labeler import Prediction, SequenceLabeler

Token = str | Sequence[str]
"""A bare token, or ``[token, feature, ...]`` as GROBID sends it."""


def split_options(options: dict[str, Any]) -> tuple[ModelConfig, TrainConfig, DataConfig]:
    """Sort keyword options into the three configs by field name (see :func:`sort_options`)."""
    return sort_options(options, (ModelConfig, TrainConfig, DataConfig))  # type: ignore[return-value]


def _as_corpus(source: str | Path | Corpus, data_format: str | None) -> Corpus:
    if isinstance(source, Corpus):
        return source
    from textorch.data.readers import read_labelled

    return read_labelled(source, data_format)


def read_evaluation_corpus(source: str | Path | Corpus, input_format: str) -> Corpus:
    """A labelled corpus to score a model on, read in the model's own format when it has one."""
    return _as_corpus(source, input_format if input_format in ("conll", "grobid") else None)


class LabelerAPI:
    """``train`` and ``tag`` for :class:`~textorch.tagging.labeler.SequenceLabeler`."""

    @classmethod
    def train(
        cls,
        train: str | Path | Corpus,
        valid: str | Path | Corpus | None = None,
        architecture: str = ModelConfig.architecture,
        embeddings: str = DataConfig.embeddings,
        output: str | Path | None = None,
        *,
        device: str = "cpu",
        cache_dir: str | None = None,
        **options: Any,
    ) -> "SequenceLabeler":
        """Train a tagger, as ``textorch seq train`` does; save it when ``output`` is given.

        Args:
            train: labelled CoNLL or GROBID file (read and checked as ``seq train`` does), or a
                :class:`Corpus` already read. Either way the run is
                :func:`textorch.tagging.training.train_corpora`, the path of every command.
            valid: validation data for early stopping; None holds out ``valid_fraction`` of
                ``train`` (seeded), as the CLI does.
            architecture: a name from ``textorch seq architectures``.
            embeddings: registry name or path of word vectors, or ``"none"``.
            output: model directory to write (must not hold another model).
            device: ``cpu``, ``cuda`` or ``auto``.
            cache_dir: textorch's cache root (default: $TEXTORCH_CACHE_DIR, else ~/.cache/textorch).
            **options: any field of ``ModelConfig``, ``TrainConfig`` or ``DataConfig``
                (``max_epoch=10``, ``batch_size=16``, ``word_hidden=50``, ``seed=1``...).

        Returns:
            The trained labeler, its ``training_result`` holding the per-epoch history.

        Raises:
            ConfigError: an unknown option or an invalid value.
            DataError: a problem in a data file, located at ``path:line``.
        """
        from textorch.tagging import training
        from textorch.train.dist import DistContext, resolve_device

        configs = split_options({**options, "architecture": architecture, "embeddings": embeddings})
        device = resolve_device(device, DistContext())
        out = None if output is None else str(output)
        if isinstance(train, (str, Path)) and (valid is None or isinstance(valid, (str, Path))):
            outcome = training.train_tagger(str(train), out, *configs, valid_path=None if valid is None else str(valid),
                                            device=device, cache_dir=cache_dir)
        else:  # train_corpora checks the output before any training
            train_corpus = _as_corpus(train, configs[2].format)
            valid_corpus = _as_corpus(valid, train_corpus.format) if valid is not None else None
            outcome = training.train_corpora(train_corpus, out, *configs, valid=valid_corpus, device=device,
                                             cache_dir=cache_dir)
        return outcome.labeler  # type: ignore[return-value]

    def tag(
        self: "SequenceLabeler",  # type: ignore[misc]
        texts: Sequence[str] | Sequence[Sequence[Token]],
        batch_size: int = 32,
        model_name: str | None = None,
    ) -> dict:
        """Tag raw texts or token sequences; the answer has DeLFT's JSON structure.

        Args:
            texts: strings (tokenised here, entities get character offsets), or token lists
                (entities get token offsets), each token a string or ``[token, feature, ...]``
                with exactly the model's number of feature columns.
            batch_size: sequences per forward pass.
            model_name: the ``model`` field of the answer (default: the architecture).

        Returns:
            ``{"software", "version", "model", "date", "runtime", "texts": [{"text",
            "entities"[, "labels"]}]}``; token lists also get their per-token ``labels``
            (GROBID labels for a GROBID model, IOB2 otherwise).
        """
        sequences, pretokenised = to_sequences(texts, self.n_features, bool(self.encoder.feature_columns))
        started = time.perf_counter()
        predictions = self.predict(sequences, batch_size=batch_size)
        runtime = time.perf_counter() - started
        name = model_name or self.model_config.architecture
        return tagging_answer(name, sequences, predictions, runtime, pretokenised, self.input_format)


def to_sequences(
    texts: object, n_features: int, needs_features: bool, where: str = "texts"
) -> tuple[list[TokenSequence], bool]:
    """Token sequences from strings or token lists, and whether the input was pre-tokenised.

    Every malformed item is a :class:`DataError` naming its position (``texts[3][2]``), so a
    server can answer 422 with a message the client can act on.
    """
    if isinstance(texts, (str, bytes)) or not isinstance(texts, Sequence):
        raise DataError(where, None, f"expected a list of texts or of token lists, got {type(texts).__name__}")
    if not texts:
        return [], False
    if all(isinstance(text, str) for text in texts):
        sequences = []
        for text in texts:
            tokens, offsets = tokenize(text)  # type: ignore[arg-type]
            sequences.append(TokenSequence(tokens, offsets=offsets, text=text))  # type: ignore[arg-type]
        return sequences, False
    sequences = [_token_sequence(item, n_features, needs_features, f"{where}[{i}]") for i, item in enumerate(texts)]
    return sequences, True


def _token_sequence(item: object, n_features: int, needs_features: bool, where: str) -> TokenSequence:
    if isinstance(item, str) or not isinstance(item, Sequence):
        raise DataError(where, None, "expected a list of tokens (do not mix texts and token lists)")
    tokens: list[str] = []
    features: list[list[str]] = []
    for j, token in enumerate(item):
        if isinstance(token, str):
            if needs_features:
                raise DataError(f"{where}[{j}]", None, f"the model needs {n_features} features per token: "
                                "send [token, feature, ...]")
            tokens.append(token)
            features.append([])
            continue
        if isinstance(token, (bytes, dict)) or not isinstance(token, Sequence) or not token:
            raise DataError(f"{where}[{j}]", None, "a token is a string or a non-empty list [token, feature, ...]")
        if not all(isinstance(value, str) for value in token):
            raise DataError(f"{where}[{j}]", None, "token and features must be strings")
        if len(token) - 1 != n_features:
            expected = (f"the token and {n_features} features" if n_features
                        else "the token alone (this model takes no features)")
            raise DataError(f"{where}[{j}]", None, f"expected {expected}, found {len(token) - 1} features")
        tokens.append(token[0])
        features.append(list(token[1:]))
    has_features = n_features > 0 and any(features)
    return TokenSequence(tokens, features=features if has_features else None)


def tagging_answer(
    model_name: str, sequences: list[TokenSequence], predictions: list["Prediction"], runtime_s: float,
    pretokenised: bool, input_format: str,
) -> dict:
    """DeLFT's tagging JSON; for token-list input each text also carries its per-token labels."""
    from textorch.data.tags import iob2_to_grobid
    from textorch.tagging.answer import tagging_document

    document = tagging_document(model_name, sequences, predictions, runtime_s)
    if pretokenised:
        for record, prediction in zip(document["texts"], predictions):
            labels = prediction.labels
            record["labels"] = iob2_to_grobid(labels) if input_format == "grobid" else list(labels)
    return document
