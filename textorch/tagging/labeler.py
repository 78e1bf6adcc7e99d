"""``SequenceLabeler``: the one object behind training, evaluation, tagging and saving.

The commands, the HTTP server, the GROBID/NER presets and n-fold training are thin adapters
over this class: every prediction is :meth:`SequenceLabeler.predict`, every training run
:func:`textorch.tagging.training.train_corpora` (which ``SequenceLabeler.train`` calls too).
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from textorch.tagging.api import LabelerAPI, read_evaluation_corpus
from textorch.tagging.config import TASK, DataConfig, ModelConfig, TrainConfig, saved_configs
from textorch.data.corpus import Corpus, TokenSequence
from textorch.data.encoding import SequenceEncoder
from textorch.data.features import parse_columns, select_feature_columns
from textorch.data.splits import cut_long_sequences
from textorch.data.word_table import WordTable
from textorch.embeddings.lookup import word_source
from textorch.errors import ConfigError
from textorch.eval.metrics import EntityCounts, entity_labels
from textorch.models.inference_batches import group_costs, inference_batches
from textorch.models.costs import batch_precision
from textorch.runtime.precision import inference_autocast
from textorch.models.crf import CRF
from textorch.models.crf_compiled import preload as preload_compiled_crf
from textorch.models.embedders import rows_encoder
from textorch.models.one_sequence import OneSequenceTagger
from textorch.models.token_vector_cache import TokenVectorCache
from textorch.models.weight_state import one_check_per_call
from textorch.models.architectures import BUILDERS, get_architecture
from textorch.models.transformer_source import TransformerParts, load_saved
from textorch.model_dir import load_checked, load_weights
from textorch.tagging.encoded import EncodedData
from textorch.tagging.model_files import write_tagger_dir
from textorch.tagging.prediction import Prediction
from textorch.tagging.word_table_calls import WordTableCalls
from textorch.tagging.network import build_network, open_transformer
from textorch.tagging.template_choice import load_table, store_table, templates_for
from textorch.train.checkpoint import Checkpointer
from textorch.train.dist import DistContext
from textorch.train.dist_eval import agreed_labels, gather_in_order, my_batches, place, reduce_counts
from textorch.train.optim import adamw_warmup_linear
from textorch.train.history import TrainingHistory
from textorch.train.tensorboard import tensorboard_callbacks
from textorch.train.trainer import Trainer, TrainingResult, adam

logger = logging.getLogger(__name__)


class SequenceLabeler(LabelerAPI):
    """A trained tagger: vocabularies, network and the word vectors it was trained with."""

    task = TASK
    """Which task the predictor serves; the shared engines (ONNX, server) ask this instead of importing the class."""

    def __init__(
        self,
        encoder: SequenceEncoder,
        model: torch.nn.Module,
        model_config: ModelConfig,
        data_config: DataConfig,
        embeddings: object | None = None,
        input_format: str = "conll",
        n_features: int = 0,
        device: torch.device | str = "cpu",
        transformer: TransformerParts | None = None,
    ) -> None:
        self.encoder = encoder
        self.transformer = transformer
        self.model = model
        self.model_config = model_config
        self.data_config = data_config
        self.embeddings = embeddings
        self.input_format = input_format
        self.n_features = n_features
        self.device = torch.device(device)
        self.model.to(self.device)
        self.word_table = WordTable(word_source(embeddings, data_config.word_lookup)) if embeddings is not None else None
        self.training_result: TrainingResult | None = None
        self.token_vector_cache = TokenVectorCache()
        """Character-encoder outputs of tokens met by earlier ``predict`` calls (see
        :mod:`textorch.models.token_vector_cache`)."""
        self.runner = None
        """Alternative network runner with the model's ``decode`` contract (``--engine onnx``), or
        one that picks per call (``--engine auto``), see :mod:`textorch.onnx.engine`; None runs the
        PyTorch network."""
        self.precision = "fp32"
        """Number format of the PyTorch network's forward passes outside training: ``fp32`` or
        ``bf16`` autocast for batches of 8 sequences or more (``--precision``, see
        :mod:`textorch.runtime.precision`)."""
        self.history: TrainingHistory | None = None
        """What ``save`` writes as history.json / history.csv / learning-curves.png; set by ``fit``."""
        self.one_sequence_route = True
        """Tag a call of one sequence through :class:`OneSequenceTagger` where it serves the model
        (the batch route's results, without a batch); False: always the batch route."""
        self._routes: tuple[torch.nn.Module, torch.nn.Module | None, OneSequenceTagger | None] | None = None
        """``(model, its character encoder, its one-sequence route)``, found once per model object
        (``self.model`` may be replaced): a module walk costs more than a one-sequence call can spare."""
        self._calls = WordTableCalls()
        """Tagging calls in flight: the word table is bounded only while none holds row ids into it."""

    # ----------------------------------------------------------------- building
    @classmethod
    def build(
        cls,
        train: Corpus,
        model_config: ModelConfig,
        data_config: DataConfig,
        embeddings: object | None = None,
        device: torch.device | str = "cpu",
        seed: int = 42,
    ) -> "SequenceLabeler":
        """Fit vocabularies on ``train`` and create an untrained network for them."""
        architecture = get_architecture(model_config.architecture)
        if architecture.features and train.n_features and data_config.feature_columns:
            columns = parse_columns(data_config.feature_columns, train.n_features)
        elif architecture.features:
            columns = select_feature_columns(train.sequences, train.n_features, data_config.feature_vocabulary_size)
        else:
            columns = []
        encoder = SequenceEncoder.fit(train.sequences, columns, model_config.max_char_length,
                                      templates_for(train, model_config))
        torch.manual_seed(seed)
        transformer, pretrained = open_transformer(model_config, architecture, embeddings)
        model = build_network(model_config, encoder, embeddings.dim if embeddings is not None else 0, transformer, pretrained)
        store_table(encoder, model)
        return cls(
            encoder, model, model_config, data_config, embeddings, train.format, train.n_features, device, transformer
        )

    def fit(
        self,
        train: Corpus,
        valid: Corpus | None,
        train_config: TrainConfig,
        ctx: DistContext | None = None,
        checkpoints: Checkpointer | None = None,
    ) -> TrainingResult:
        """Train in place; keeps the weights of the best validation epoch.

        ``checkpoints`` saves the training state as it goes and, when resuming, continues
        from its newest checkpoint (see :mod:`textorch.train.resume`).
        """
        ctx = ctx or DistContext()
        sequences = cut_long_sequences(train.sequences, train_config.max_sequence_length)
        data = self.encode(sequences, with_labels=True)
        validate = None
        if valid is not None and train_config.early_stop:
            valid_data = self.encode(valid.sequences, with_labels=True)

            def validate(model: torch.nn.Module) -> float:
                # Each process scores its share of the validation set; counts are summed over
                # processes, so every process gets the same F1 (and early-stopping decision).
                # The batch size does not depend on the world size: same batches, same F1.
                counts = self.count_entities(valid.sequences, valid_data, batch_size=max(train_config.batch_size, 64), ctx=ctx)
                return counts.scores()["f1"]

        torch.manual_seed(train_config.seed)
        callbacks = tensorboard_callbacks(train_config.tensorboard_dir, "f1")
        trainer = Trainer(self.model, train_config, self.device, ctx, validate, optimizer_factory=self._optimizer_factory(),
                          callbacks=callbacks, checkpoints=checkpoints)
        self.training_result = trainer.fit(data)
        self.history = TrainingHistory.single(TASK, "f1", self.training_result)
        self.model.eval()
        return self.training_result

    # ----------------------------------------------------------------- inference
    def encode(self, sequences: list[TokenSequence], with_labels: bool = False) -> EncodedData:
        word_rows = self.word_table.index if self.word_table is not None else None
        encoded = self.encoder.encode_many(sequences, with_labels=with_labels, word_rows=word_rows)
        windows = None
        if self.transformer is not None:
            windows = self.transformer.collator(self.transformer.align([s.tokens for s in sequences]))
        return EncodedData(encoded, self.word_table, windows)

    def _optimizer_factory(self):
        """AdamW with warm-up and linear decay for transformer fine-tuning; DeLFT's Adam otherwise."""
        return adamw_warmup_linear if self.transformer is not None else adam

    @torch.inference_mode()
    @one_check_per_call()  # every batch reads the same weights: their kept forms are checked once
    def _decode(
        self, data: EncodedData, batch_size: int, ctx: DistContext | None = None, gather: bool = True,
        with_scores: bool = True,
    ) -> list[Prediction | None]:
        """Predictions in input order. With several processes each decodes every
        ``world_size``-th length-sorted batch (the batches one process would form, so results
        are identical); ``gather`` gives every process all predictions, else only its own
        (None elsewhere). Empty sequences belong to rank 0. ``with_scores=False``: labels only
        (``scores`` None), which skips the CRF's forward-backward pass."""
        ctx = ctx or DistContext()
        if self.model.training:  # eval() walks every submodule, which one-sequence calls notice
            self.model.eval()
        lengths = data.lengths()
        nonempty = [i for i, n in enumerate(lengths) if n > 0]
        label_items = self.encoder.labels.items
        runner = self._runner_for(sum(lengths))
        if runner is None and len(lengths) == 1 and ctx.world_size == 1:
            single = self._tag_one_sequence(data, with_scores)
            if single is not None:
                return [single]
        costs = group_costs(self.device, self.transformer is not None, getattr(runner, "group_costs", None))
        batches = [[nonempty[j] for j in chunk]
                   for chunk in inference_batches([lengths[i] for i in nonempty], batch_size, costs)]
        local: list[tuple[int, Prediction]] = []
        if ctx.is_main:
            local += [(i, Prediction([], [] if with_scores else None)) for i, n in enumerate(lengths) if n == 0]
        mine = my_batches(batches, ctx)
        token_vectors = None
        precision = "fp32" if runner is not None else self.precision
        if runner is None and mine:
            with inference_autocast(batch_precision(precision, len(nonempty)), self.device):
                token_vectors = data.token_vectors(self._char_encoder(), self.device, self.token_vector_cache)
        on_cpu = self.device.type == "cpu"  # batches are built there: no copy to make
        for indices in mine:
            # An ONNX runner reads char_ids itself: no distinct-token rows to prepare for it.
            batch = data.batch(indices, token_vectors, char_rows=runner is None)
            if not on_cpu:
                batch = batch.to(self.device)
            with inference_autocast(batch_precision(precision, len(indices)), self.device):
                paths, scores = (runner or self.model).decode(batch, with_scores=with_scores)
            # Whole-batch lists, then slices: row-by-row NumPy conversions cost twice as much.
            path_rows = (paths.cpu().numpy() if isinstance(paths, torch.Tensor) else paths).tolist()
            score_rows = None
            if with_scores:
                score_rows = (scores.float().cpu().numpy() if isinstance(scores, torch.Tensor) else scores).tolist()
            for row, index in enumerate(indices):
                n = lengths[index]
                row_scores = None if score_rows is None else score_rows[row][:n]
                local.append((index, Prediction([label_items[k] for k in path_rows[row][:n]], row_scores)))
        if gather and ctx.world_size > 1:
            return gather_in_order(local, len(lengths), ctx)
        return place(local, len(lengths))

    def preload_crf_decoder(self) -> bool:
        """Load the compiled CRF decoder now (:mod:`textorch.models.crf_compiled`) if this model
        would use it much: a BiLSTM-CRF family tagger on the CPU (on a GPU the CRF decodes
        there). For a long-lived process (a server) before its first call; otherwise the first
        tagging call loads it."""
        if self.device.type != "cpu" or self.transformer is not None:
            return False
        if not any(isinstance(m, CRF) for m in self.model.modules()):
            return False
        return preload_compiled_crf()

    def _runner_for(self, n_tokens: int):
        """What runs the network for a call of ``n_tokens`` tokens: ``self.runner``, or under
        ``--engine auto`` (:class:`textorch.onnx.engine.AutoRunner`) its choice; None: PyTorch."""
        choose = getattr(self.runner, "runner_for", None)
        return choose(n_tokens) if choose is not None else self.runner

    def _tag_one_sequence(self, data: EncodedData, with_scores: bool) -> Prediction | None:
        """The prediction for a call of one sequence through its :class:`OneSequenceTagger`, or
        None where that route does not serve it."""
        item = data.encoded[0]
        encoder, route = self._model_routes()
        if (route is None or not self.one_sequence_route or self.device.type != "cpu" or not len(item)
                or batch_precision(self.precision, 1) != "fp32"):
            return None
        token_vectors = data.token_vectors(encoder, self.device, self.token_vector_cache)
        decoded = route.decode(item, data.word_table, token_vectors, with_scores)
        if decoded is None:
            return None
        labels = self.encoder.labels.items
        return Prediction([labels[k] for k in decoded[0]], decoded[1])

    def _model_routes(self) -> tuple[torch.nn.Module | None, OneSequenceTagger | None]:
        """The model's character encoder and one-sequence route (see ``_routes``)."""
        routes = self._routes
        if routes is None or routes[0] is not self.model:
            encoder = rows_encoder(self.model)
            routes = self._routes = (self.model, encoder, OneSequenceTagger.of(self.model, encoder))  # one assignment
        return routes[1], routes[2]

    def _char_encoder(self) -> torch.nn.Module | None:
        return self._model_routes()[0]

    def predict(
        self, sequences: list[TokenSequence], batch_size: int = 32, ctx: DistContext | None = None,
        with_scores: bool = True,
    ) -> list[Prediction]:
        """Labels for each sequence, in input order; no token is ever dropped.

        ``batch_size`` is per process; with a multi-process ``ctx`` the work is shared and
        every process returns the complete, identical list. ``with_scores=False`` gives labels
        only (``Prediction.scores`` None): a CRF then skips its forward-backward pass.
        """
        with self._calls.call(self.word_table):
            return self._decode(self.encode(sequences), batch_size, ctx, with_scores=with_scores)  # type: ignore[return-value]

    def count_entities(
        self,
        sequences: list[TokenSequence],
        data: EncodedData | None = None,
        batch_size: int = 64,
        ctx: DistContext | None = None,
    ) -> EntityCounts:
        """Entity counts of this model's predictions against the gold labels of ``sequences``.

        With a multi-process ``ctx`` every process counts its own share of the sequences and
        the counts are summed with one all-reduce: each sequence counts exactly once, and the
        result equals a single process's.
        """
        counts = self.local_counts(sequences, data, batch_size, ctx)
        return self.reduced_counts(counts, {tag for s in sequences if s.labels for tag in s.labels}, ctx)

    def local_counts(self, sequences: list[TokenSequence], data: EncodedData | None = None, batch_size: int = 64,
                     ctx: DistContext | None = None) -> EntityCounts:
        """This process's share of :meth:`count_entities`, before the sum over processes (a
        streamed evaluation adds these up chunk by chunk and reduces once)."""
        ctx = ctx or DistContext()
        data = data or self.encode(sequences)
        predictions = self._decode(data, batch_size, ctx, gather=False, with_scores=False)
        mine = [i for i, p in enumerate(predictions) if p is not None]
        counts = EntityCounts()
        gold = [sequences[i].labels or ["O"] * len(sequences[i]) for i in mine]
        counts.update(gold, [predictions[i].labels for i in mine])  # type: ignore[union-attr]
        return counts

    def reduced_counts(self, counts: EntityCounts, gold_tags: set[str], ctx: DistContext | None = None) -> EntityCounts:
        """Local counts summed over the processes; ``gold_tags``: the tags of the whole gold data."""
        ctx = ctx or DistContext()
        if ctx.world_size == 1:
            return counts
        # Gold labels of the whole data (held by every process) plus the model's own: the same
        # layout everywhere, with a slot for labels only some shard or only the gold data has.
        labels = agreed_labels(entity_labels(self.encoder.labels.items), entity_labels(gold_tags))
        return reduce_counts(counts, labels, ctx)

    def evaluate(self, corpus: Corpus | str | Path, batch_size: int = 64, ctx: DistContext | None = None) -> dict:
        """Entity-level scores (micro and per label) of this model on a labelled corpus or file.

        ``batch_size`` is per process; with a multi-process ``ctx`` the scores come from
        counts summed over processes, identical to a single process's."""
        corpus = read_evaluation_corpus(corpus, self.input_format)
        missing = [s.line for s in corpus.sequences if s.labels is None]
        if missing:
            raise ConfigError(f"{corpus.path}: evaluation needs labelled data (no labels at line {missing[0]})")
        return self.count_entities(corpus.sequences, batch_size=batch_size, ctx=ctx).scores()

    # ----------------------------------------------------------------- persistence
    def save(self, directory: str | Path, training_run: dict | None = None) -> Path:
        """Write the model directory atomically; ``training_run`` (the checksum of the options and
        data that made it, see :mod:`textorch.train.resume`) lets ``--resume`` recognise a finished run."""
        return write_tagger_dir(directory, self, training_run)

    @classmethod
    def load(
        cls,
        directory: str | Path,
        device: torch.device | str = "cpu",
        embeddings: object | None = None,
        cache_dir: str | Path | None = None,
        engine: str = "torch",
    ) -> "SequenceLabeler":
        """Rebuild from ``config.json`` then load the weights; embeddings are re-opened and checked.
        ``engine``: what runs the network, as the commands' ``--engine`` (``torch``, ``onnx`` or
        ``auto``, see :func:`textorch.onnx.engine.use_engine`)."""
        from textorch.embeddings.for_models import reopen_saved
        from textorch.onnx.engine import check_engine, use_engine

        check_engine(engine, device)  # a wrong engine is refused before anything is read
        from textorch.tagging.delft_import.importer import converted_dir, is_delft_model_dir

        if is_delft_model_dir(directory):  # a DeLFT model: converted once into the cache
            directory = converted_dir(directory, cache_dir, embeddings)
        saved = load_checked(directory, TASK, BUILDERS, default_builder="rnn_tagger.v1")
        model_config, data_config, input_format, n_features = saved_configs(saved.config, saved.builder)
        described = saved.config.get("embeddings")
        embeddings = reopen_saved(described, embeddings, cache_dir)
        encoder = SequenceEncoder.from_json(saved.vocab)
        transformer, shell = None, None
        if get_architecture(model_config.architecture).uses_transformer:
            transformer, shell = load_saved(directory, model_config.transformer_window, model_config.transformer_stride)
        model = build_network(model_config, encoder, int(described["dim"]) if described else 0, transformer, shell)
        load_weights(model, saved.state, directory)
        load_table(encoder, model)
        labeler = cls(encoder, model, model_config, data_config, embeddings, input_format, n_features, device, transformer)
        use_engine(labeler, directory, engine)
        return labeler

    @property
    def label_names(self) -> list[str]:
        # entity labels only: a model imported from DeLFT also has its padding label "<PAD>"
        return sorted({lab[2:] for lab in self.encoder.labels.items if lab[1:2] == "-"})

