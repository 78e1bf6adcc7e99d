"""``TextClassifier``: the one object behind classification training, evaluation, prediction and saving.

A classifier is an ensemble of ``fold_count`` networks (one by default). With n-fold
cross-validation each member is trained with one fold held out for early stopping and, for
multi-label tasks, for tuning its per-class decision thresholds; the members are saved together
in one model directory and combined at prediction time (normalised geometric mean of their
probabilities, as DeLFT does).

Evaluation is count-based (:class:`~textorch.eval.cls_metrics.ClassCounts`): each process
scores its share of the inference batches and the counts are summed with one all-reduce, so
a multi-process evaluation gives the single-process numbers.

Training runs sit above the class (:mod:`textorch.classification.training` builds, fits, scores
and saves classifiers); the class fits its members in place (:meth:`TextClassifier.fit`).
The class is whole here; what it uses lives in the modules below it, none of which imports it:
the networks (:mod:`~textorch.classification.network`), the model directory
(:mod:`~textorch.classification.model_files`) and the answer
(:func:`~textorch.classification.answer.texts_document`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from torch import nn

from textorch.train.config import TrainConfig
from textorch.data.cls_batching import EncodedTexts, PieceEncoder, WordEncoder
from textorch.data.cls_readers import ClsCorpus
from textorch.data.splits import stratified_folds
from textorch.errors import ConfigError, DataError
from textorch.eval.cls_metrics import ClassCounts
from textorch.models.cpu_routes import FAST, decide
from textorch.models.inference_batches import inference_batches
from textorch.models.costs import batch_precision
from textorch.onnx.opening import DEFAULT_ENGINE, EngineOptions, run_loaded
from textorch.runtime.precision import inference_autocast
from textorch.classification.answer import texts_document
from textorch.classification.config import TASK, TRANSFORMER_BUILDER, ClsDataConfig, ClsModelConfig
from textorch.classification.model_files import ClassifierParts, read_classifier_dir, write_classifier_dir
from textorch.classification.network import new_members
from textorch.classification.prediction import ClsPrediction
from textorch.models.classifiers import ClassifierEnsemble, get_cls_architecture
from textorch.train.checkpoint import Checkpointer
from textorch.train.dist import DistContext
from textorch.train.cls_objective import ClassificationObjective, resolve_class_weights, transformer_optimizer
from textorch.train.dist_eval import my_batches, predict_in_parallel, reduce_counts
from textorch.train.fold_spread import fold_exchange
from textorch.train.history import RunRecord, TrainingHistory
from textorch.train.tensorboard import tensorboard_callbacks
from textorch.train.trainer import Trainer, TrainingResult, adam

logger = logging.getLogger(__name__)


@dataclass
class FoldReport:
    """One ensemble member's training: sizes, epochs and its scores on its validation part."""

    fold: int
    n_train: int
    n_valid: int
    training: TrainingResult
    valid_scores: dict | None = None


class TextClassifier:
    """Classes, text encoder and an ensemble of networks; see the module docstring."""

    task = TASK
    """Which task the predictor serves; the shared engines (ONNX, server) ask this instead of importing the class."""

    def __init__(self, model_config: ClsModelConfig, data_config: ClsDataConfig, classes: list[str], multi_label: bool,
                 network: ClassifierEnsemble, text_encoder: WordEncoder | PieceEncoder, embeddings: object | None = None,
                 transformer_parts: object | None = None, device: torch.device | str = "cpu") -> None:
        self.model_config, self.data_config = model_config, data_config
        self.classes, self.multi_label = list(classes), multi_label
        self.network, self.text_encoder = network, text_encoder
        self.embeddings, self.transformer_parts = embeddings, transformer_parts
        self.device = torch.device(device)
        self.network.to(self.device)
        k = len(network.members)
        self.member_thresholds = np.full((k, len(classes)), 0.5)
        self.thresholds = np.full(len(classes), 0.5)
        self.fold_reports: list[FoldReport] = []
        self.history: TrainingHistory | None = None
        """What ``save`` writes as history.json / history.csv / learning-curves.png; set by ``fit``."""
        self.runner = None
        """Alternative runner of the whole ensemble, ``runner.logits(batch)`` (``--engine onnx|auto``,
        set by :mod:`textorch.onnx.opening`); None runs the PyTorch network. Single members (training,
        validation) always run in PyTorch."""
        self.precision = "fp32"
        """Number format of the PyTorch network's forward passes outside training: ``fp32`` or
        ``bf16`` autocast for batches of 8 texts or more (``--precision``, see
        :mod:`textorch.runtime.precision`)."""

    # ----------------------------------------------------------------- building
    @classmethod
    def build(cls, train: ClsCorpus, model_config: ClsModelConfig, data_config: ClsDataConfig,
              embeddings: object | None = None, device: torch.device | str = "cpu", seed: int = 42) -> "TextClassifier":
        """Classes and vocabulary from ``train``, and ``fold_count`` untrained networks."""
        if not train.labelled:
            raise ConfigError(f"{train.path}: training needs labelled data")
        classes = train.label_set()
        if len(classes) < (1 if train.multi_label else 2):
            raise DataError(train.path, None, f"single-label training needs at least 2 classes, found {classes}")
        members, text_encoder, parts = new_members(train, model_config, len(classes), embeddings, seed)
        network = ClassifierEnsemble(members, train.multi_label)
        return cls(model_config, data_config, classes, train.multi_label, network, text_encoder, embeddings, parts, device)

    # ----------------------------------------------------------------- training
    def fit(self, train: ClsCorpus, valid: ClsCorpus | None, train_config: TrainConfig, ctx: DistContext | None = None,
            checkpoints: Callable[[int | None], Checkpointer] | None = None, spread: bool = False) -> list[FoldReport]:
        """Train every member in place (member i on all folds but fold i when ``fold_count > 1``).

        ``checkpoints(member)`` gives the checkpointer of a member's training loop (``member`` is
        None with one fold), see :mod:`textorch.train.resume`. ``spread`` (several processes,
        several members): each process trains its own members alone, then all processes get
        every member (:mod:`textorch.train.fold_spread`); otherwise each member is trained on
        all processes in turn.
        """
        ctx = ctx or DistContext()
        self.runner = None  # an ONNX runner holds the export of the weights before: training runs in PyTorch
        k = self.model_config.fold_count

        def checkpointer(i: int) -> Checkpointer | None:
            return None if checkpoints is None else checkpoints(i if k > 1 else None)

        texts, targets = [e.text for e in train.examples], self.targets(train)
        if k == 1:
            valid_part = None if valid is None else ([e.text for e in valid.examples], self.targets(valid))
            self.fold_reports = [self._fit_member(0, texts, targets, valid_part, train_config, ctx, checkpointer(0))]
        else:
            if valid is not None:
                raise ConfigError("--valid cannot be used with --fold-count > 1: each member is validated on its held-out fold")
            if len(texts) < k:
                raise ConfigError(f"--fold-count {k} needs at least {k} training texts, got {len(texts)}")
            folds = stratified_folds(train.examples, k, train_config.seed)

            def fit_fold(i: int, member_ctx: DistContext) -> FoldReport:
                keep = np.setdiff1d(np.arange(len(texts)), folds[i])
                return self._fit_member(i, [texts[j] for j in keep], targets[keep], ([texts[j] for j in folds[i]], targets[folds[i]]),
                                        train_config, member_ctx, checkpointer(i))

            if spread and ctx.enabled:
                self.fold_reports = self._fit_spread(fit_fold, ctx)
            else:
                self.fold_reports = [fit_fold(i, ctx) for i in range(k)]
        # The ensemble has no held-out data of its own: it takes the mean of its members' thresholds.
        self.thresholds = self.member_thresholds.mean(axis=0)
        runs = [RunRecord.from_result("train" if k == 1 else f"member {r.fold + 1}", r.training) for r in self.fold_reports]
        self.history = TrainingHistory(TASK, self._selection_metric, runs)
        return self.fold_reports

    def _fit_spread(self, fit_fold: Callable[[int, DistContext], FoldReport], ctx: DistContext) -> list[FoldReport]:
        """This process's members alone, then every member's weights, thresholds and report everywhere.

        Weights travel one member at a time from the process that trained it, so no process
        holds more than one extra copy.
        """
        with fold_exchange(ctx, self.model_config.fold_count) as exchange:
            mine = {}
            for i in exchange.mine:
                report = fit_fold(i, ctx.alone())
                mine[i] = (report, self.member_thresholds[i].copy())  # tuned by the training just done
            reports = []
            for i, (report, thresholds) in enumerate(exchange.gather(mine)):
                member = self.network.members[i]
                owner = exchange.owner(i)
                state = exchange.broadcast({k: v.detach().cpu() for k, v in member.state_dict().items()}
                                           if owner == ctx.rank else None, owner)
                if owner != ctx.rank:
                    member.load_state_dict(state)
                    self.member_thresholds[i] = thresholds
                reports.append(report)
        return reports

    def _fit_member(self, i: int, texts: list[str], targets: np.ndarray, valid: tuple[list[str], np.ndarray] | None,
                    train_config: TrainConfig, ctx: DistContext, checkpointer: Checkpointer | None = None) -> FoldReport:
        data = self.text_encoder.encode(texts, targets)
        valid_data = self.text_encoder.encode(*valid) if valid is not None and len(valid[0]) else None
        weights = resolve_class_weights(self.data_config.class_weights, self.classes, self.multi_label, targets)
        if weights is not None:
            logger.info("class weights: %s", ", ".join(f"{c}={w:.3g}" for c, w in zip(self.classes, weights.tolist())))
        objective = ClassificationObjective(self.network.members[i], self.multi_label, weights).to(self.device)
        validate = None
        if valid_data is not None and train_config.early_stop:
            def validate(_: nn.Module) -> float:
                return self._selection_score(self.count_encoded(valid_data, member=i, ctx=ctx))

        is_transformer = get_cls_architecture(self.model_config.architecture).builder == TRANSFORMER_BUILDER
        torch.manual_seed(train_config.seed + i)
        run = f"member-{i + 1}" if self.model_config.fold_count > 1 else None
        callbacks = tensorboard_callbacks(train_config.tensorboard_dir, self._selection_metric, run)
        trainer = Trainer(objective, train_config, self.device, ctx, validate, transformer_optimizer if is_transformer else adam,
                          callbacks=callbacks, checkpoints=checkpointer)
        result = trainer.fit(data)
        self.network.eval()
        scores = None
        if valid_data is not None:
            if self.multi_label:
                self.member_thresholds[i] = self.count_encoded(valid_data, member=i, ctx=ctx).tune_thresholds()
            scores = self.count_encoded(valid_data, member=i, ctx=ctx).scores()
        return FoldReport(i, len(texts), 0 if valid_data is None else len(valid_data.ids), result, scores)

    @property
    def _selection_metric(self) -> str:
        """Name of the score :meth:`_selection_score` returns (for the training history)."""
        return "roc_auc" if self.multi_label else "macro_f1"

    def _selection_score(self, counts: ClassCounts) -> float:
        """Early stopping follows macro-F1 (single-label, robust to imbalance) or macro ROC-AUC (multi-label,
        independent of the thresholds that are tuned afterwards)."""
        scores = counts.scores()
        if self.multi_label and scores.get("roc_auc") is not None:
            return float(scores["roc_auc"])
        return float(scores["macro"]["f1"])

    # ----------------------------------------------------------------- inference
    def targets(self, corpus: ClsCorpus) -> np.ndarray:
        """Class ids (N,) or indicators (N, C); a label the model does not know is a DataError at its line."""
        if not corpus.labelled:
            raise DataError(corpus.path, None, "labels are needed here, but the data has none")
        if corpus.multi_label != self.multi_label:
            kind = "multi-label" if self.multi_label else "single-label"
            raise DataError(corpus.path, None, f"the model is {kind} but the data is not (check --label-column)")
        index = {c: k for k, c in enumerate(self.classes)}
        if corpus.classes is not None and sorted(corpus.classes) != sorted(self.classes):
            raise DataError(corpus.path, 1, f"label columns {corpus.classes} differ from the model's classes {self.classes}")
        out = np.zeros((len(corpus), len(self.classes)), dtype=np.float32) if self.multi_label else np.zeros(len(corpus), dtype=np.int64)
        for row, example in enumerate(corpus.examples):
            for label in example.labels:
                if label not in index:
                    raise DataError(corpus.path, example.line, f"unknown label {label!r}; the model's classes are: {', '.join(self.classes)}")
                if self.multi_label:
                    out[row, index[label]] = 1.0
                else:
                    out[row] = index[label]
        return out

    def _batches(self, data: EncodedTexts, batch_size: int) -> list[list[int]]:
        """Length-sorted batches, on the CPU cut where lengths spread (not for transformers)."""
        routes = decide(FAST, self.device, self.transformer_parts is not None)
        return inference_batches(data.lengths(), batch_size, routes.batch_groups)

    @torch.inference_mode()
    def _decode(self, data: EncodedTexts, indices: list[int], member: int | None) -> np.ndarray:
        if self.runner is not None and member is None:
            return self.runner.logits(data.batch(indices)).float().numpy()
        with inference_autocast(batch_precision(self.precision, len(indices)), self.device):
            return self.network(data.batch(indices).to(self.device), member).float().cpu().numpy()

    def count_encoded(self, data: EncodedTexts, member: int | None = None, ctx: DistContext | None = None,
                      batch_size: int = 64) -> ClassCounts:
        """Counts over labelled encoded texts; each process takes its share of batches, then one all-reduce."""
        return reduce_counts(self.local_counts(data, member, ctx, batch_size), self.classes, ctx or DistContext())

    def local_counts(self, data: EncodedTexts, member: int | None = None, ctx: DistContext | None = None,
                     batch_size: int = 64) -> ClassCounts:
        """This process's share of :meth:`count_encoded`, before the sum over processes (a streamed
        evaluation adds these up chunk by chunk and reduces once)."""
        ctx = ctx or DistContext()
        self.network.eval()
        thresholds = self.thresholds if member is None else self.member_thresholds[member]
        counts = ClassCounts(self.classes, self.multi_label)
        for indices in my_batches(self._batches(data, batch_size), ctx):
            logits = self._decode(data, indices, member)
            if self.multi_label:
                counts.update_multi(data.targets[indices], logits, thresholds)
            else:
                counts.update_single(data.targets[indices], logits.argmax(axis=1))
        return counts

    def evaluate(self, corpus: ClsCorpus, member: int | None = None, ctx: DistContext | None = None, batch_size: int = 64) -> dict:
        """Scores of the ensemble (or of one member) on a labelled corpus."""
        data = self.text_encoder.encode([e.text for e in corpus.examples], self.targets(corpus))
        return self.count_encoded(data, member, ctx, batch_size).scores()

    def predict_logits(self, texts: list[str], batch_size: int = 64, ctx: DistContext | None = None) -> np.ndarray:
        """Ensemble logits (N, C) in input order; with several processes each decodes a share, all get all."""
        ctx = ctx or DistContext()
        self.network.eval()
        data = self.text_encoder.encode(texts)
        rows = predict_in_parallel(self._batches(data, batch_size), lambda idx: list(self._decode(data, idx, None)), len(texts), ctx)
        return np.stack(rows) if rows else np.zeros((0, len(self.classes)), dtype=np.float32)

    def predict(self, texts: list[str], batch_size: int = 64, ctx: DistContext | None = None) -> list[ClsPrediction]:
        """Per text, the probability of each class and the predicted class(es)."""
        logits = torch.from_numpy(self.predict_logits(texts, batch_size, ctx)).double()
        probabilities = (torch.sigmoid(logits) if self.multi_label else torch.softmax(logits, dim=-1)).numpy()
        out = []
        for row in probabilities:
            if self.multi_label:
                labels = [c for c, p, t in zip(self.classes, row, self.thresholds) if p >= t]
            else:
                labels = [self.classes[int(row.argmax())]]
            out.append(ClsPrediction(labels, {c: float(p) for c, p in zip(self.classes, row)}))
        return out

    def classify(self, texts: Sequence[str], batch_size: int = 64, model_name: str | None = None) -> dict:
        """Class scores of each text, in the JSON structure of ``cls classify`` and ``POST /classify``:
        ``{"software", "version", "model", "date", "runtime", "classes", "multi_label",
        "classifications": [{"text", "scores", "labels"}]}``."""
        if isinstance(texts, (str, bytes)) or not all(isinstance(text, str) for text in texts):
            raise DataError("texts", None, "expected a list of strings")
        started = time.perf_counter()
        predictions = self.predict(list(texts), batch_size)
        runtime = time.perf_counter() - started
        return texts_document(model_name or self.model_config.architecture, self, list(texts), predictions, runtime)

    # ----------------------------------------------------------------- persistence
    def save(self, directory: str | Path, training_run: dict | None = None) -> Path:
        """Write the model directory atomically; ``training_run`` (see :mod:`textorch.train.resume`)
        lets ``--resume`` recognise a finished run."""
        parts = ClassifierParts(self.model_config, self.data_config, self.classes, self.multi_label, self.network,
                                self.text_encoder, self.embeddings, self.transformer_parts, self.thresholds,
                                self.member_thresholds, self.history)
        return write_classifier_dir(directory, parts, training_run)

    @classmethod
    def load(cls, directory: str | Path, device: torch.device | str = "cpu", embeddings: object | None = None,
             cache_dir: str | Path | None = None, engine: str = DEFAULT_ENGINE) -> "TextClassifier":
        """Rebuild from ``config.json`` with the builder it names, then load the weights.
        ``engine``: what runs the network, as the commands' ``--engine`` (:mod:`textorch.onnx.opening`):
        by default ``auto``, every call in ONNX Runtime on the CPU (exported into ``MODEL/onnx``
        on first use); ``torch`` for PyTorch alone (``fit`` always trains in PyTorch; a model
        whose weights you change otherwise, load it with ``torch``)."""
        options = EngineOptions(engine, device)
        options.check()  # a wrong engine is refused before anything is read
        saved = read_classifier_dir(directory, embeddings, cache_dir)
        classifier = cls(saved.model_config, saved.data_config, saved.classes, saved.multi_label, saved.network,
                         saved.text_encoder, saved.embeddings, saved.transformer_parts, device)
        classifier.thresholds, classifier.member_thresholds = saved.thresholds, saved.member_thresholds
        run_loaded(classifier, directory, options)
        return classifier

