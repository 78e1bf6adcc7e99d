"""``SequenceLabeler``: the one object behind evaluation, tagging and saving, and the network
that training fits.

The commands, the HTTP server, the GROBID/NER presets and n-fold training are thin adapters
over this class: every prediction is :meth:`SequenceLabeler.predict`. Training runs sit above
it (:mod:`textorch.tagging.training`, which builds, fits, scores and saves labelers); the class
itself only fits one network in place (:meth:`SequenceLabeler.fit`).
The class is whole here; what it uses lives in the modules below it, none of which imports it:
reading input (:mod:`~textorch.tagging.inputs`), the answer (:mod:`~textorch.tagging.answer`),
the model directory (:mod:`~textorch.tagging.model_files`), a DeLFT model's conversion
(:mod:`~textorch.tagging.delft_import`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

import torch

from textorch.tagging.answer import tagging_document
from textorch.tagging.config import TASK, DataConfig, ModelConfig, TrainConfig
from textorch.tagging.inputs import Token, read_evaluation_corpus, to_sequences
from textorch.data.corpus import Corpus, TokenSequence
from textorch.data.encoding import SequenceEncoder
from textorch.data.splits import training_pieces, valid_iob2
from textorch.data.word_table import WordTable
from textorch.embeddings.lookup import word_source
from textorch.eval.metrics import EntityCounts
from textorch.errors import ConfigError
from textorch.models.cpu_routes import FAST, CpuRoutes, decide, taking
from textorch.models.inference_batches import inference_batches
from textorch.models.costs import batch_precision
from textorch.runtime.precision import inference_autocast
from textorch.models.one_sequence import OneSequenceTagger
from textorch.models.token_vector_cache import TokenVectorCache
from textorch.models.weight_state import one_check_per_call
from textorch.onnx.opening import DEFAULT_ENGINE, EngineOptions, run_loaded
from textorch.models.transformer_source import TransformerParts
from textorch.tagging.decoding import ModelRoutes, decode_batches, one_sequence_in_runner, runner_for
from textorch.tagging.encoded import EncodedData
from textorch.tagging.delft_import.importer import converted_dir, is_delft_model_dir
from textorch.tagging.model_files import TaggerParts, read_tagger_dir, write_tagger_dir
from textorch.tagging.prediction import Prediction
from textorch.tagging.scoring import count_predicted, epoch_choice_score, summed_counts
from textorch.tagging.word_table_calls import WordTableCalls
from textorch.tagging.network import forbids_iob2_moves, new_network, preload_crf_decoder
from textorch.train.checkpoint import Checkpointer
from textorch.train.dist import DistContext
from textorch.train.dist_eval import gather_in_order, my_batches, place
from textorch.train.optim import adamw_warmup_linear
from textorch.train.history import TrainingHistory
from textorch.train.tensorboard import tensorboard_callbacks
from textorch.train.trainer import Trainer, TrainingResult, adam


class SequenceLabeler:
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
        encoder.compiled_rows = True  # its CRF decodes with Numba on the CPU: template rows may too
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
        """Character-encoder outputs of tokens met by earlier calls (:mod:`~textorch.models.token_vector_cache`)."""
        self.runner = None
        """Alternative network runner with the model's ``decode`` contract (``--engine onnx``), or
        one that picks per call (``--engine auto``), set by :mod:`textorch.onnx.opening`; None runs
        the PyTorch network."""
        self.precision = "fp32"
        """Number format of the PyTorch network's forward passes outside training: ``fp32`` or
        ``bf16`` autocast for batches of 8 sequences or more (``--precision``, see
        :mod:`textorch.runtime.precision`)."""
        self.history: TrainingHistory | None = None
        """What ``save`` writes as history.json / history.csv / learning-curves.png; set by ``fit``."""
        self.routes: CpuRoutes = FAST
        """The CPU fast paths tagging calls may take (:mod:`textorch.models.cpu_routes`; each call
        decides from these and its facts, once); ``FAST.without("one_sequence")``, say, to rule
        one out, :data:`~textorch.models.cpu_routes.REFERENCE` for none."""
        self._routes = ModelRoutes()  # the model's character encoder and one-sequence route, found once per model
        self._calls = WordTableCalls()  # calls in flight: the word table is bounded only while none holds its row ids

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
        encoder, model, transformer = new_network(train, model_config, data_config, embeddings, seed)
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
        if train_config.template_only:  # before any data is encoded: a wrong architecture is refused at once
            try:
                self.model.train_template_features_alone()
            except (AttributeError, ValueError) as exc:
                raise ConfigError(f"--template-only: {exc}; architecture {self.model_config.architecture}") from None
        self.runner = None  # an ONNX runner holds the export of the weights before: training runs in PyTorch
        sequences = training_pieces(train.sequences, train_config.max_sequence_length)
        if forbids_iob2_moves(self.model_config):
            sequences = valid_iob2(sequences)
        data = self.encode(sequences, with_labels=True)
        validate = None
        if valid is not None and train_config.early_stop:
            valid_data = self.encode(valid.sequences, with_labels=True)

            def validate(model: torch.nn.Module) -> float:
                # Each process scores its share of the validation set; counts are summed over
                # processes, so every process gets the same F1 (and early-stopping decision).
                # The batch size does not depend on the world size: same batches, same F1.
                # A model that predicts one field type only is scored 0 (never the epoch kept).
                counts = self.count_entities(valid.sequences, valid_data, batch_size=max(train_config.batch_size, 64), ctx=ctx)
                return epoch_choice_score(counts)

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
        runner = runner_for(self.runner, sum(lengths), max(lengths, default=0))
        routes = decide(self.routes, self.device, self.transformer is not None, getattr(runner, "group_costs", None),
                        torch_runs=runner is None)
        nonempty = [i for i, n in enumerate(lengths) if n > 0]
        local: list[tuple[int, Prediction]] = []
        with taking(routes):  # the network's layers read the call's routes (cpu_routes.current)
            if routes.one_sequence and len(lengths) == 1 and ctx.world_size == 1:
                single = self._tag_one_sequence(data, with_scores, routes)
                if single is not None:
                    return [single]
            batches = [[nonempty[j] for j in chunk]
                       for chunk in inference_batches([lengths[i] for i in nonempty], batch_size, routes.batch_groups)]
            if ctx.is_main:
                local += [(i, Prediction([], [] if with_scores else None)) for i, n in enumerate(lengths) if n == 0]
            mine = my_batches(batches, ctx)
            token_vectors = None
            precision = "fp32" if runner is not None else self.precision
            if runner is None and mine:
                with inference_autocast(batch_precision(precision, len(nonempty)), self.device):
                    token_vectors = data.token_vectors(self._char_encoder(), self.device, self.token_vector_cache)
            local += decode_batches(runner or self.model, data, mine, token_vectors, precision, self.device,
                                    self.encoder.labels.items, with_scores, char_rows=runner is None)
        if gather and ctx.world_size > 1:
            return gather_in_order(local, len(lengths), ctx)
        return place(local, len(lengths))

    def preload_crf_decoder(self) -> bool:
        """Load the compiled CRF decoder now (:mod:`textorch.models.cpu_decoder`) if this model
        would use it much: a BiLSTM-CRF family tagger on the CPU (on a GPU the CRF decodes
        there). For a long-lived process (a server) before its first call; otherwise the first
        tagging call loads it."""
        return preload_crf_decoder(self.model, self.device, self.transformer is not None)

    def _tag_one_sequence(self, data: EncodedData, with_scores: bool, routes: CpuRoutes) -> Prediction | None:
        """The prediction for a call of one sequence through its :class:`OneSequenceTagger`, or
        None where that route does not serve it (a call whose ``routes`` take it)."""
        item = data.encoded[0]
        encoder, route = self._model_routes()
        if route is None or not len(item) or batch_precision(self.precision, 1) != "fp32":
            return None
        token_vectors = data.token_vectors(encoder, self.device, self.token_vector_cache)
        decoded = route.decode(item, data.word_table, token_vectors, with_scores, routes)
        if decoded is None:
            return None
        labels = self.encoder.labels.items
        return Prediction([labels[k] for k in decoded[0]], decoded[1])

    def _model_routes(self) -> tuple[torch.nn.Module | None, OneSequenceTagger | None]:
        """The model's character encoder and one-sequence route (see ``_routes``)."""
        return self._routes.of(self.model)

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
            data = self.encode(sequences)
            one = one_sequence_in_runner(self.runner, data, self.encoder.labels.items, with_scores, ctx)
            return [one] if one is not None else self._decode(data, batch_size, ctx, with_scores=with_scores)  # type: ignore[list-item]

    def tag(
        self,
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
        return tagging_document(name, sequences, predictions, runtime, self.input_format if pretokenised else None)

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
        return count_predicted(sequences, self._decode(data, batch_size, ctx, gather=False, with_scores=False))

    def reduced_counts(self, counts: EntityCounts, gold_tags: set[str], ctx: DistContext | None = None) -> EntityCounts:
        """Local counts summed over the processes; ``gold_tags``: the tags of the whole gold data."""
        return summed_counts(counts, self.encoder.labels.items, gold_tags, ctx or DistContext())

    def evaluate(self, corpus: Corpus | str | Path, batch_size: int = 64, ctx: DistContext | None = None) -> dict:
        """Entity-level scores (micro and per label) of this model on a labelled corpus or file.

        ``batch_size`` is per process; with a multi-process ``ctx`` the scores come from
        counts summed over processes, identical to a single process's."""
        corpus = read_evaluation_corpus(corpus, self.input_format)
        return self.count_entities(corpus.sequences, batch_size=batch_size, ctx=ctx).scores()

    # ----------------------------------------------------------------- persistence
    def save(self, directory: str | Path, training_run: dict | None = None) -> Path:
        """Write the model directory atomically; ``training_run`` (the checksum of the options and
        data that made it, see :mod:`textorch.train.resume`) lets ``--resume`` recognise a finished run."""
        parts = TaggerParts(self.encoder, self.model, self.model_config, self.data_config, self.embeddings,
                            self.input_format, self.n_features, self.transformer, self.history)
        return write_tagger_dir(directory, parts, training_run)

    @classmethod
    def load(
        cls,
        directory: str | Path,
        device: torch.device | str = "cpu",
        embeddings: object | None = None,
        cache_dir: str | Path | None = None,
        engine: str = DEFAULT_ENGINE,
    ) -> "SequenceLabeler":
        """Rebuild from ``config.json`` then load the weights; embeddings are re-opened and checked.
        ``engine``: what runs the network, as the commands' ``--engine`` (:mod:`textorch.onnx.opening`):
        by default ``auto``, ONNX Runtime for small calls on the CPU (exported into ``MODEL/onnx``
        on first use), PyTorch for the rest; ``torch`` for PyTorch alone (``fit`` always trains
        in PyTorch; a model whose weights you change otherwise, load it with ``torch``)."""
        options = EngineOptions(engine, device)
        options.check()  # a wrong engine is refused before anything is read
        if is_delft_model_dir(directory):  # a DeLFT model: converted once into the cache
            directory = converted_dir(directory, cache_dir, embeddings)
        parts = read_tagger_dir(directory, embeddings, cache_dir)
        labeler = cls(parts.encoder, parts.model, parts.model_config, parts.data_config, parts.embeddings,
                      parts.input_format, parts.n_features, device, parts.transformer)
        run_loaded(labeler, directory, options)
        return labeler

    @property
    def label_names(self) -> list[str]:
        # entity labels only: a model imported from DeLFT also has its padding label "<PAD>"
        return sorted({lab[2:] for lab in self.encoder.labels.items if lab[1:2] == "-"})

