"""Optimisation settings shared by both tasks, and the JSON round trip of any config dataclass."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from textorch.errors import ConfigError


PRECISIONS = ("fp32", "bf16", "fp16")
LR_SCHEDULES = ("constant", "linear")
BERT_GROUP = "BERT architectures"
"""Title of the command-line option group of the transformer settings."""


def option(default: Any, help: str, **cli: Any) -> Any:
    """A config field that is also a command-line option, with its CLI facts beside its default.

    The facts are plain data in ``metadata["cli"]`` (so the layers below the CLI stay free of it):
    ``help``, where ``{default}`` marks the place of the default, else ``(default: X)`` is appended
    unless the text already speaks of its default or the default is None; optionally ``aliases``
    (option strings besides ``--field-name``), ``choices``, ``metavar`` and ``group`` (an argument
    group's title); ``flag`` (the option string in place of ``--field-name``, for a name the
    command line had before), ``action`` (``append``: a tuple field given one item per use;
    ``store_false``: a switch that turns a true field off) and ``cli_default`` (the option's value
    when not given, where the command resolves the field itself; the help still says the field's
    default). ``textorch.cli.config_options`` turns them into options and back into configs, so that
    a default is written once, here.
    """
    return field(default=default, metadata={"cli": {"help": help, **cli}})


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation and data splitting."""

    batch_size: int = option(32, "global batch size")
    """Global batch size: the same meaning whatever the number of devices."""
    learning_rate: float = option(0.001, "Adam learning rate; for BERT* the rate of the layers above the transformer")
    max_epoch: int = option(50, "maximum epochs")
    patience: int = option(5, "early-stopping patience in epochs")
    """Epochs without improvement of validation F1 before stopping."""
    early_stop: bool = option(True, "stop on validation F1")
    clip_grad: float = option(5.0, "gradient norm clipping")
    """Maximum gradient norm (0 disables clipping)."""
    lr_decay: float = option(1.0, "multiply the learning rate by this when validation F1 has not improved for more "
                             "than --lr-decay-patience epochs (1: a constant rate) (default: {default})", metavar="FACTOR")
    """Factor the learning rate is multiplied by when validation F1 has not improved for more than
    ``lr_decay_patience`` epochs in a row (1: a constant rate). Applies where the optimizer has no
    schedule of its own (not the BERT family's warm-up and decay)."""
    lr_decay_patience: int = option(2, "epochs without gain tolerated before a cut", metavar="EPOCHS")
    bucket_batches: int = option(10, "batches per length bucket: more is faster, fewer gives more random batches")
    """Batches per length bucket: each epoch's shuffled sequences are cut into buckets of this
    many batches and sorted by length within each. More: less padding, so faster steps, but
    batches of near-equal lengths, which train worse models; 1 gives DeLFT's batches, drawn at
    random from the whole set (what ``textorch grobid`` uses: there buckets cost F1 against
    DeLFT, and the corpora are small enough to afford slower epochs; docs/performance.md). Batches that mix very different
    lengths run their word RNN in length groups (:func:`textorch.models.length_groups.length_groups`)."""
    max_sequence_length: int = option(0, "cut longer training sequences into pieces (default: {default}, no limit)")
    """Longer training sequences are cut into pieces of this many tokens (0: no limit)."""
    seed: int = option(42, "random seed for splits, initialisation and batches")
    valid_fraction: float = 0.1
    """Share of the training data held out for early stopping when no --valid file is given."""
    min_validation_sequences: int = option(
        0, "validation data smaller than this joins the training data, which then trains for --max-epoch epochs "
           "without early stopping (default: {default}, off)", metavar="N")
    """A share held out for early stopping must hold at least this many sequences (or
    ``min_validation_tokens`` tokens); with less data, too few to tell epochs apart, the run
    trains on every sequence for ``max_epoch`` epochs instead (0: always hold the share out)."""
    min_validation_tokens: int = option(
        0, "... unless it holds at least N tokens: a few dozen whole documents can pick an epoch "
           "(default: {default}, sequences alone decide)", metavar="N")
    """A validation share with fewer than ``min_validation_sequences`` sequences is kept all the
    same where it holds at least this many tokens: one whole document (a header, a bibliography,
    a paper's body) holds dozens to hundreds of fields, so a few dozen of them tell epochs apart
    where as many dates cannot, and on such corpora the number of epochs that serves differs from
    one corpus to the next by more than any step or token budget can guess (0: off)."""
    steps_without_validation: int = option(
        0, "without validation data, train for about N optimizer steps (whole epochs, at most --max-epoch) "
           "(default: {default}, --max-epoch epochs)", metavar="N")
    """A run with no validation data (none given, or a share too small to hold out) trains for
    about this many optimizer steps, in whole epochs and at most ``max_epoch``, with the
    ``linear`` schedule: with nothing to stop it, a fixed count of epochs would cost ten times
    more on ten times the data, a few dozen sequences need many epochs, and the last epoch is
    the model, which a rate falling to zero lets settle (0: ``max_epoch`` epochs at
    ``lr_schedule``)."""
    lr_schedule: str = option(
        "constant", "constant, or linear: the learning rate falls to zero over the run, for runs without validation "
                    "whose last epoch is the model", choices=LR_SCHEDULES)
    """``constant``, or ``linear``: the rate falls linearly to zero over the run. Not for the
    BERT family, which has its own warm-up and decay."""
    tokens_without_validation: int = option(
        0, "without validation data, also stop after the whole epochs that see about N training tokens "
           "(default: {default}, no such limit)", metavar="N")
    """With no validation data, the epochs are also capped so that the run sees about this many
    tokens: a step budget fit for a few hundred short sequences would train a corpus of whole
    documents (a few hundred thousand tokens) for hours without gain (0: no cap)."""
    template_learning_rate: float = option(
        0.0, "*_TEMPLATE models: Adam rate of the CRF template weights (default: {default}, --learning-rate)",
        metavar="RATE")
    """``_TEMPLATE`` architectures: the Adam rate of the template feature weights (0: the common
    ``learning_rate``). Adam moves each weight by about its rate a step however small its
    gradient, and the table holds hundreds of thousands of them."""
    template_only: bool = option(
        False, "*_TEMPLATE models: train the CRF over the template features alone, the recurrent emissions off "
               "(GROBID's CRF inside the same network; default: {default})")
    """``_TEMPLATE`` architectures: the emission layer reads nothing (zero, frozen) and the CRF
    learns from its template features alone, as GROBID's CRF does; the saved model serves as any
    other. Where a few dozen long sequences are all the data, the recurrent part learns their
    order rather than their fields (docs/performance.md, "Corpora of figure's kind")."""
    template_l1: float = option(
        0.0, "*_TEMPLATE models: L1 penalty on the template weights, counted as a CRF's objective counts it "
             "(summed over the training sequences; GROBID's CRF trains with 0.5) (default: {default}: none, "
             "0.5 with --template-only)", metavar="RHO")
    """``_TEMPLATE`` architectures: L1 penalty on the template table, in a CRF's scale (the loss
    summed over the training sequences; each step adds its share). Wapiti's L1 keeps a few hundred
    of tens of thousands of features, those that hold across sequences, where a dense table
    labels a long run of unseen tokens by many weak clues (0: none; with ``template_only``,
    Wapiti's 0.5, GROBID's setting)."""
    template_only_from_tokens: int = option(
        0, "without validation data, where training sequences (pieces) average at least N tokens, train as "
           "--template-only (default: {default}, never)", metavar="N")
    """With no validation data and training pieces of at least this many tokens on average, train
    as ``template_only`` (0: never): nothing picks an epoch for the recurrent part, and a few
    dozen long sequences give it few independent examples to learn from."""
    tokens_with_validation: int = option(
        0, "with validation data, train for the whole epochs that see about N tokens at a rate falling linearly to "
           "zero, keeping the epoch that validates best, the CRF template table at a tenth of the rate unless "
           "--template-learning-rate is given (default: {default}, early stopping as --patience says)",
        metavar="N")
    """With validation data, train for the whole epochs (at most ``max_epoch``) that see about this
    many tokens, the rate falling linearly to zero, and keep the epoch that scores best on the
    validation data, with no early stop: the late epochs at a small rate are where a long run
    settles, and the kept epoch is the guard where a long run goes past its best (0: early stopping
    with ``patience``, at ``lr_schedule``)."""
    max_batch_tokens: int = option(
        0, "lower the batch size where needed so that a batch holds about N tokens at most "
           "(default: {default}, off)", metavar="N")
    """The batch size is lowered, where needed, so that a batch of training sequences (pieces of
    ``max_sequence_length``) holds about this many tokens on average: twenty whole documents to a
    step would leave too few steps and too much memory (0: keep ``batch_size``)."""
    min_steps_per_epoch: int = option(
        0, "lower the batch size where needed so that an epoch has at least N steps (default: {default}, off)", metavar="N")
    """The batch size is lowered, where needed, so that an epoch over the training data has at
    least this many steps: a few dozen sequences in batches of 20 give an epoch of 3 steps
    (0: keep ``batch_size``)."""
    transformer_learning_rate: float = option(
        5e-5, "AdamW rate of the transformer; --learning-rate drives the layers on top", group=BERT_GROUP)
    """BERT family: AdamW rate of the pre-trained encoder (``learning_rate`` drives the layers on top)."""
    warmup_fraction: float = option(0.1, "share of steps with rising rate before linear decay", group=BERT_GROUP)
    """BERT family: share of the training steps with a linearly rising rate, before linear decay to 0."""
    weight_decay: float = 0.01
    """BERT family: AdamW weight decay of the encoder's weight matrices."""
    grad_accum: int = option(
        1, "process each global batch in K micro-batches (same result, less memory; default: {default})", metavar="K")
    """Micro-batches per optimizer step: the global batch is processed in this many pieces."""
    precision: str = option(
        "fp32", "fp32, bf16 autocast (CPU or GPU) or fp16 autocast with gradient scaling (GPU)", choices=PRECISIONS)
    """``fp32``, ``bf16`` (autocast, CPU or GPU) or ``fp16`` (autocast with a gradient scaler, GPU only)."""
    tensorboard_dir: str | None = None
    """Write TensorBoard event files here, one scalar set per epoch (needs the ``tensorboard`` package)."""

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ConfigError(f"--batch-size must be >= 1, got {self.batch_size}")
        for name in ("template_l1", "template_only_from_tokens"):
            if getattr(self, name) < 0:
                raise ConfigError(f"--{name.replace('_', '-')} must be >= 0, got {getattr(self, name)}")
        if self.template_learning_rate < 0:
            raise ConfigError(f"--template-learning-rate must be >= 0 (0: --learning-rate), got {self.template_learning_rate}")
        if self.learning_rate <= 0:
            raise ConfigError(f"--learning-rate must be > 0, got {self.learning_rate}")
        if self.max_epoch < 1:
            raise ConfigError(f"--max-epoch must be >= 1, got {self.max_epoch}")
        if self.patience < 1:
            raise ConfigError(f"--patience must be >= 1, got {self.patience}")
        if not 0.0 < self.lr_decay <= 1.0:
            raise ConfigError(f"--lr-decay must be in (0, 1], got {self.lr_decay}")
        if self.lr_decay_patience < 0:
            raise ConfigError(f"--lr-decay-patience must be >= 0, got {self.lr_decay_patience}")
        if self.bucket_batches < 1:
            raise ConfigError(f"--bucket-batches must be >= 1, got {self.bucket_batches}")
        if self.max_sequence_length < 0:
            raise ConfigError(f"--max-sequence-length must be >= 0, got {self.max_sequence_length}")
        if self.min_validation_sequences < 0 or self.min_steps_per_epoch < 0 or self.min_validation_tokens < 0:
            raise ConfigError("min_validation_sequences, min_validation_tokens and min_steps_per_epoch must be >= 0 "
                              "(0: off)")
        if self.tokens_without_validation < 0 or self.max_batch_tokens < 0 or self.tokens_with_validation < 0:
            raise ConfigError("tokens_without_validation, tokens_with_validation and max_batch_tokens must be >= 0 "
                              "(0: off)")
        if self.steps_without_validation < 0:
            raise ConfigError(f"steps_without_validation must be >= 0 (0: off), got {self.steps_without_validation}")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ConfigError(f"unknown --lr-schedule {self.lr_schedule!r}; choose one of: {', '.join(LR_SCHEDULES)}")
        if not 0.0 < self.valid_fraction < 1.0:
            raise ConfigError(f"valid_fraction must be in (0, 1), got {self.valid_fraction}")
        if self.transformer_learning_rate <= 0:
            raise ConfigError(f"--transformer-learning-rate must be > 0, got {self.transformer_learning_rate}")
        if not 0.0 <= self.warmup_fraction < 1.0:
            raise ConfigError(f"--warmup-fraction must be in [0, 1), got {self.warmup_fraction}")
        if self.weight_decay < 0:
            raise ConfigError(f"weight_decay must be >= 0, got {self.weight_decay}")
        if not 1 <= self.grad_accum <= self.batch_size:
            raise ConfigError(f"--grad-accum must be in 1..batch size ({self.batch_size}), got {self.grad_accum}")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"unknown --precision {self.precision!r}; choose one of: {', '.join(PRECISIONS)}")

    def micro_batch_size(self, world_size: int) -> int:
        """Sequences one device processes at once (at most): global / (devices x accumulation)."""
        return -(-self.batch_size // (world_size * self.grad_accum))


def to_dict(config: object) -> dict:
    return asdict(config)  # type: ignore[call-overload]


def from_dict(cls: type, data: dict) -> object:
    """Rebuild a config from saved JSON, for both tasks: keys a newer release might add are
    ignored, missing ones keep their defaults, and lists become tuples again (JSON has no tuple)."""
    known = {f.name for f in fields(cls)}
    return cls(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in data.items() if k in known})


def sort_options(options: dict[str, Any], config_classes: tuple[type, ...]) -> tuple[object, ...]:
    """One config of each class from keyword options, sorted by field name; an unknown name is an error.

    Both tasks' ``train(**options)`` take their options this way, so the config dataclasses
    stay the one place for defaults: an option not given keeps its dataclass default.
    """
    known: set[str] = set()
    chosen: list[dict[str, Any]] = []
    for cls in config_classes:
        names = {f.name for f in fields(cls)}
        known |= names
        chosen.append({k: v for k, v in options.items() if k in names})
    unknown = sorted(set(options) - known)
    if unknown:
        raise ConfigError(f"unknown training option(s) {', '.join(unknown)}; valid options: {', '.join(sorted(known))}")
    return tuple(cls(**values) for cls, values in zip(config_classes, chosen))
