"""DeLFT's ready-made applications: per-model GROBID defaults and the CoNLL-2003 NER data layout.

The numbers are those of DeLFT's ``delft/applications/grobidTagger.py`` (``configure()``) and
``nerTagger.py`` (``configure()``), so that DeLFT users get the runs they are used to. Feature
columns are chosen from the data as DeLFT chooses them (the columns with at most its features
vocabulary size of distinct values: 9-15 for date, 9-18 for the name and affiliation models of
today's GROBID), so that a file of another GROBID version trains too. Every value can still be
overridden on the command line.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, fields, replace
from pathlib import Path

from textorch.tagging.config import ModelConfig, TrainConfig
from textorch.data.corpus import Corpus
from textorch.data.features import DELFT_FEATURES_VOCABULARY_SIZE, require_feature_columns
from textorch.data.checked_read import read_validated
from textorch.errors import ConfigError, DataError
from textorch.models.architecture_table import get_architecture

logger = logging.getLogger(__name__)

GROBID_MODELS = (
    "affiliation-address", "citation", "date", "header", "name-citation", "name-header", "software", "figure",
    "table", "reference-segmenter", "segmentation", "funding-acknowledgement", "patent-citation",
)
"""The GROBID models DeLFT 1.2.0's grobidTagger knows; other names get its generic defaults."""

GROBID_DEFAULT_ARCHITECTURE = "BidLSTM_CRF_FEATURES_TEMPLATE"
"""What ``textorch grobid`` and the bridge train when no architecture is named: GROBID's CRF
features inside the BiLSTM-CRF (docs/grobid.md, docs/performance.md)."""

MIN_VALIDATION_SEQUENCES = 300
"""textorch's own GROBID default: a validation share of fewer sequences (a 10 % share of fewer
than 3,000) is too noisy to pick an epoch (one sequence moves its F1 by a point or more), so
such data trains on every sequence, as GROBID's CRF trains on all it is given."""
MIN_VALIDATION_TOKENS = 10_000
"""textorch's own GROBID default: a validation share of fewer than ``MIN_VALIDATION_SEQUENCES``
sequences is kept where it holds this many tokens. Whole documents (headers, bibliographies,
paper bodies, a PDF's lines) give shares of 20,000 tokens and more from a few dozen documents,
each with dozens of fields; the small models' shares hold at most a few thousand tokens. How
many epochs whole documents need differs by corpus (docs/performance.md, "GROBID's big
models"), which validation finds and a token budget does not."""
TOKENS_WITH_VALIDATION = 8_000_000
"""textorch's own GROBID default: with validation data, the epochs that see about this many
tokens at a rate falling to zero, the best-validating epoch kept. On whole documents the epochs
that serve differ by corpus (headers gain up to about 30 epochs where bibliographies and paper
bodies lose past a dozen, docs/performance.md): a long annealed run with the best epoch kept
serves both, where early stopping at a constant rate stops headers before they settle."""
STEPS_WITHOUT_VALIDATION = 2000
"""textorch's own GROBID default: data trained without validation takes about this many steps
(at most ``max_epoch`` epochs: 30 epochs of name-header's 1,300 sequences, 60 of figure's 70),
its learning rate falling linearly to zero."""
MIN_STEPS_PER_EPOCH = 20
"""textorch's own GROBID default: batches small enough for 20 steps an epoch on small data."""
DEFAULT_BATCH_SIZE = 20
"""textorch's own GROBID default: at most 20 sequences a batch (DeLFT's for most models)."""
TRAINING_PIECE_LENGTH = 1000
"""textorch's own GROBID default: training reads sequences in pieces of at most this many tokens
(every token kept; tagging reads whole sequences). No sequence of the small models' corpora is
longer; whole documents (headers, bibliographies, paper bodies, a PDF's lines) are read a
thousand tokens at a time, which gives more, cheaper steps than whole documents would."""
MAX_BATCH_TOKENS = 4000
"""textorch's own GROBID default: about this many tokens a batch at most (nine headers, four
pieces of a bibliography); no batch of the small models' corpora comes near it."""
TOKENS_WITHOUT_VALIDATION = 3_000_000
"""textorch's own GROBID default: without validation, the epochs see about this many tokens at
most (affiliation-address's step budget reads 1.3 million; a corpus of 300,000 tokens of whole
documents gets ten epochs)."""


TEMPLATE_ONLY_FROM_TOKENS = 100
"""textorch's own GROBID default: data trained without validation whose pieces average this many
tokens or more trains the CRF over the template features alone (``template_only``, with the L1
penalty GROBID's CRF trains with). Figure's captions (about 50 tokens) gain from the recurrent
part; the same figures merged into a few dozen sequences of about 150 tokens lost to the CRF with
it and match it without (docs/performance.md, "Corpora of figure's kind"). Whole documents keep
the network: they validate."""


DELFT_LR_DECAY = 0.5
"""DeLFT 1.2.0 halves the recurrent taggers' learning rate after three epochs without a gain in
validation F1 (its ``ReduceLROnPlateau``, patience 2): its applications train that way."""


@dataclass(frozen=True)
class AppDefaults:
    """Training settings an application picks for a model; None leaves the library default."""

    batch_size: int
    max_sequence_length: int
    max_epoch: int
    feature_columns: str | None = None
    early_stop: bool = True
    word_hidden: int | None = None
    feature_vocabulary_size: int = DELFT_FEATURES_VOCABULARY_SIZE
    bucket_batches: int | None = None
    lr_decay: float | None = None
    min_validation_sequences: int = 0
    min_validation_tokens: int = 0
    tokens_with_validation: int = 0
    min_steps_per_epoch: int = 0
    steps_without_validation: int = 0
    tokens_without_validation: int = 0
    max_batch_tokens: int = 0
    template_only_from_tokens: int = 0


APP_OPTIONS = tuple(f.name for f in fields(AppDefaults) if f.name != "word_hidden")
"""The command-line options an application defaults (every :class:`AppDefaults` field but the
network size, which :func:`with_model_defaults` sets)."""


# (max sequence length, batch size) per GROBID model, recurrent and transformer architectures,
# as DeLFT 1.2.0's configure() sets them; "software" and, for transformers,
# "funding-acknowledgement" also cover the names that start with them, as there.
_GROBID_RNN = {"citation": (500, 30), "header": (3500, 9), "date": (50, 60), "affiliation-address": (600, 20),
               "software": (1500, 20), "reference-segmenter": (3000, 5), "funding-acknowledgement": (800, 30),
               "patent-citation": (1000, 40), "figure": (1000, 3), "table": (3000, 3)}
_GROBID_BERT = {"citation": (200, 20), "header": (512, 6), "date": (30, 80), "affiliation-address": (200, 20),
                "software": (512, 8), "funding-acknowledgement": (512, 8), "patent-citation": (512, 8)}
_RNN_PREFIXES = ("software",)
_BERT_PREFIXES = ("software", "funding-acknowledgement")


def _delft_entry(table: dict[str, tuple[int, int]], prefixes: tuple[str, ...], model: str,
                 default: tuple[int, int]) -> tuple[int, int]:
    """The (length, batch) DeLFT picks for ``model``: its own entry, a prefix's, or the default."""
    if model in table:
        return table[model]
    prefix = next((p for p in prefixes if model.startswith(p)), None)
    return table[prefix] if prefix else default


def grobid_model_name(model: str, architecture: str) -> str:
    """DeLFT's directory name of a GROBID model: ``grobid-date-BidLSTM_CRF``."""
    return f"grobid-{model}-{architecture}"


def grobid_defaults(model: str, architecture: str) -> AppDefaults:
    """What ``textorch grobid MODEL`` trains ``architecture`` with: for textorch's own
    architecture (CRF template features) the same settings whatever the model's name, whose
    rules follow the data (:func:`textorch_grobid_defaults`); for DeLFT's architectures, what
    DeLFT's ``configure()`` chooses for ``model``."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", model):
        raise ConfigError(f"invalid GROBID model name {model!r}; e.g. {', '.join(GROBID_MODELS[:4])}")
    arch = get_architecture(architecture)
    if arch.template:
        return textorch_grobid_defaults()
    if model not in GROBID_MODELS:
        logger.info("no DeLFT settings for GROBID model %r (known: %s): generic defaults", model, ", ".join(GROBID_MODELS))
    # DeLFT draws every batch at random from the whole shuffled set. Length buckets (the
    # library's default) make batches of near-equal lengths, which on GROBID's corpora cost F1
    # against DeLFT's (docs/performance.md, "Where name-header's F1 gap came from"); these
    # corpora are small, so they take DeLFT's random batches and their slower epochs (length
    # groups in the word RNN win back part of the padding, models/costs.TRAINING_GROUP_COSTS).
    if arch.uses_transformer:
        length, batch = _delft_entry(_GROBID_BERT, _BERT_PREFIXES, model, (200, 20))
        software = model.startswith("software")
        return AppDefaults(batch, min(length, 512), 30 if software else 60, early_stop=not software, bucket_batches=1)
    length, batch = _delft_entry(_GROBID_RNN, _RNN_PREFIXES, model, (3000, 20))
    return AppDefaults(batch, length, 80 if model == "header" else 60, bucket_batches=1, lr_decay=DELFT_LR_DECAY)


def textorch_grobid_defaults() -> AppDefaults:
    """textorch's GROBID default, one for every model name: a corpus of 60 figures, of 1,400
    names or of 700 whole headers is told apart by its data (the rules of
    ``training_data.fitted_to_data``: validation only where the share is big enough, batches of
    enough steps and bounded tokens, epochs from a step and a token budget), never by its name.
    Random batches and DeLFT's plateau cut, as DeLFT's GROBID runs."""
    return AppDefaults(batch_size=DEFAULT_BATCH_SIZE, max_sequence_length=TRAINING_PIECE_LENGTH, max_epoch=60,
                       bucket_batches=1, lr_decay=DELFT_LR_DECAY, min_validation_sequences=MIN_VALIDATION_SEQUENCES,
                       min_validation_tokens=MIN_VALIDATION_TOKENS, tokens_with_validation=TOKENS_WITH_VALIDATION,
                       min_steps_per_epoch=MIN_STEPS_PER_EPOCH, steps_without_validation=STEPS_WITHOUT_VALIDATION,
                       tokens_without_validation=TOKENS_WITHOUT_VALIDATION, max_batch_tokens=MAX_BATCH_TOKENS,
                       template_only_from_tokens=TEMPLATE_ONLY_FROM_TOKENS)


_TRAIN_NAME = re.compile(r"(?P<model>.+)-(?P<date>\d{6})\.train(?:\.gz)?$")


def resolve_grobid_input(path: str, model: str) -> str:
    """A training file as given, or in a folder the newest ``MODEL-YYMMDD.train`` (DeLFT's rule)."""
    folder = Path(path)
    if not folder.is_dir():
        return path
    candidates = [(m.group("date"), p) for p in folder.iterdir()
                  if (m := _TRAIN_NAME.fullmatch(p.name)) and m.group("model") == model and p.is_file()]
    if not candidates:
        raise DataError(path, None, f"no {model}-YYMMDD.train file in this folder")
    newest = max(candidates)[1]
    logger.info("input: %s (the newest of %d %s training files)", newest, len(candidates), model)
    return str(newest)


def read_grobid_data(path: str, model: str, max_sequence_length: int, skip_bad_sequences: bool = False,
                     max_sequences: int = 0, feature_columns: str | None = None) -> Corpus:
    """The validated GROBID training data of ``model`` (a file, or the newest in a folder).

    ``feature_columns``: the columns a features model was told to use; every sequence must
    have them (or is skipped with ``skip_bad_sequences``).
    """
    train, _, _ = read_validated(resolve_grobid_input(path, model), None, None, "grobid", max_sequence_length,
                                 skip_bad_sequences)
    if feature_columns:
        train = require_feature_columns(train, feature_columns, skip_bad_sequences)
    return _first(train, max_sequences)


# ---------------------------------------------------------------------------------- NER
NER_DATASETS = {"conll2003": ("eng.train", "eng.testa", "eng.testb")}
"""Dataset name -> (train, validation, test) file names inside ``--data-dir``."""


def ner_model_name(dataset: str, architecture: str) -> str:
    """DeLFT's directory name of an NER model: ``ner-en-conll2003-BidLSTM_CRF``."""
    return f"ner-en-{dataset}-{architecture}"


def ner_defaults(architecture: str) -> AppDefaults:
    """DeLFT's ``nerTagger.configure()`` for CoNLL-2003."""
    arch = get_architecture(architecture)
    if arch.uses_transformer:
        return AppDefaults(batch_size=32, max_sequence_length=150, max_epoch=15, early_stop=False)
    if architecture == "BidLSTM_CNN_CRF":
        return AppDefaults(batch_size=32, max_sequence_length=300, max_epoch=30, word_hidden=200, lr_decay=DELFT_LR_DECAY)
    return AppDefaults(batch_size=32, max_sequence_length=300, max_epoch=50, lr_decay=DELFT_LR_DECAY)


def ner_files(dataset: str, data_dir: str) -> tuple[str, str, str]:
    if dataset not in NER_DATASETS:
        raise ConfigError(f"unknown --dataset {dataset!r}; choose one of: {', '.join(NER_DATASETS)}")
    if not Path(data_dir).is_dir():
        raise DataError(data_dir, None, f"--data-dir: not a folder (expected {', '.join(NER_DATASETS[dataset])} in it)")
    return tuple(str(Path(data_dir) / name) for name in NER_DATASETS[dataset])  # type: ignore[return-value]


def read_ner_data(dataset: str, data_dir: str, max_sequence_length: int = 0, skip_bad_sequences: bool = False,
                  max_sequences: int = 0) -> tuple[Corpus, Corpus, Corpus]:
    """Train, validation and test corpora, IOB1 read as it is (tags become IOB2 on reading)."""
    train, valid, test = read_validated(*ner_files(dataset, data_dir), "conll", max_sequence_length, skip_bad_sequences)
    return _first(train, max_sequences), _first(valid, max_sequences), _first(test, max_sequences)  # type: ignore[arg-type]


def concatenated(*corpora: Corpus) -> Corpus:
    """One corpus of all sequences (DeLFT's NER ``train`` uses all three files)."""
    first = corpora[0]
    return replace(first, sequences=[s for c in corpora for s in c.sequences],
                   path=" + ".join(Path(c.path).name for c in corpora))


def _first(corpus: Corpus, n: int) -> Corpus:
    """The first ``n`` sequences (all with 0): quick trials on big data."""
    if n <= 0 or n >= len(corpus):
        return corpus
    return replace(corpus, sequences=corpus.sequences[:n], path=f"{corpus.path} (first {n})")


def resolve_options(defaults: AppDefaults, given: dict[str, object]) -> dict[str, object]:
    """The training options with the application's values where the user gave none (None).

    ``given`` maps option names (``batch_size``, ``max_sequence_length``, ``max_epoch``,
    ``early_stop``, ``feature_columns``, ``bucket_batches``, ``lr_decay``...) to what the command
    line says.
    """
    chosen = {name: getattr(defaults, name) for name in APP_OPTIONS}
    for name in ("bucket_batches", "lr_decay"):  # None in the defaults: the library's own value
        if chosen[name] is None:
            chosen[name] = getattr(TrainConfig, name)
    return {name: given[name] if given.get(name) is not None else value for name, value in chosen.items()}


def with_model_defaults(defaults: AppDefaults, model: ModelConfig) -> ModelConfig:
    """The network sizes an application sets (DeLFT's 200 LSTM units for BidLSTM_CNN_CRF on NER)."""
    return replace(model, word_hidden=defaults.word_hidden) if defaults.word_hidden is not None else model
