"""Import of a model trained by DeLFT into a textorch model directory.

A DeLFT model directory holds ``config.json`` (DeLFT's ``ModelConfig``), ``preprocessor.json``
(vocabularies) and its weights: ``model.safetensors`` (DeLFT >= 1.2), ``model_weights.pt``
(a pickled state dict, DeLFT <= 1.1, read with ``weights_only=True`` so that no pickled code
runs) or ``model_weights.hdf5`` (DeLFT <= 0.3, Keras; see :mod:`.keras_weights`).

The import writes a normal textorch directory, as :meth:`SequenceLabeler.save` does, with
the network options that make textorch compute what DeLFT computes (``rnn_tagger.v3``: DeLFT's
feature BiLSTM, character CNN, stacked GRUs) and DeLFT's word-vector lookup
(``word_lookup="delft"``). The labels then equal DeLFT's ``Sequence.tag`` labels token for
token, given the same word vectors (``benchmarks/parity/bench_delft_import.py`` measures it).

BERT_CRF keeps DeLFT's CRF over every sub-token of the window (``transformer_crf="subtokens"``),
with the transformer's configuration and tokenizer saved in the DeLFT directory.

Not reproduced: DeLFT cuts a sequence longer than its ``max_sequence_length`` (or tags it in
windows); textorch tags it whole (a transformer: in its own windows), so such sequences may
differ near the cut. For BERT_CRF, DeLFT drops some sub-tokens of byte-level BPE and
SentencePiece tokenizers before the encoder; textorch does not, so only WordPiece (BERT-like)
tokenizers are known to give DeLFT's labels.
"""

from __future__ import annotations

import hashlib
import json
import pickle
from pathlib import Path
from typing import Any

import torch

from textorch.data.encoding import SequenceEncoder
from textorch.data.tags import is_grobid_label
from textorch.data.vocab import PAD, UNK, Vocabulary
from textorch.errors import ConfigError, ModelFormatError
from textorch.tagging.config import DataConfig, ModelConfig
from textorch.tagging.model_files import DELFT_SOURCE_FILE, TaggerParts, write_tagger_dir
from textorch.tagging.delft_import.weights import (
    Layout,
    label_order,
    map_bert_state,
    map_state,
)

CONFIG_FILE = "config.json"
PREPROCESSOR_FILE = "preprocessor.json"
WEIGHT_FILES = ("model.safetensors", "model_weights.pt", "model_weights.hdf5")
DELFT_IMPORTS_FOLDER = "delft-imports"
"""Converted DeLFT models, under textorch's cache root (beside ``embeddings/``)."""

# DeLFT architecture -> (char encoder, casing, features, word-level layers, dense layer, output layer)
_LAYOUTS: dict[str, tuple[str, bool, bool, list[str], str | None, str]] = {
    "BidLSTM_CRF": ("lstm", False, False, ["bilstm"], "dense", "linear"),
    "BidLSTM_CRF_CASING": ("lstm", True, False, ["bilstm"], "dense", "linear"),
    "BidLSTM_CRF_FEATURES": ("lstm", False, True, ["bilstm"], "dense", "dense2"),
    "BidGRU_CRF": ("lstm", False, False, ["bigru1", "bigru2"], "dense", "linear"),
    "BidLSTM_CNN_CRF": ("cnn", False, False, ["bilstm"], "dense", "linear"),
    "BidLSTM": ("lstm", False, False, ["bilstm"], None, "classifier"),
}
"""The recurrent family; BERT_CRF is imported by :func:`_bert_tagger`."""
_WHY_NOT = {
    "ChainCRF": "its BiLSTM runs over the batch's padding, so DeLFT's own labels depend on the batch",
    "BidLSTM_CNN": "its casing channel has no counterpart in textorch's BidLSTM_CNN",
}


def is_delft_model_dir(path: str | Path) -> bool:
    """Whether ``path`` is a DeLFT model directory (and not a textorch one, which has no
    ``preprocessor.json`` and whose ``config.json`` names a task)."""
    path = Path(path)
    if not (path / CONFIG_FILE).is_file() or not (path / PREPROCESSOR_FILE).is_file():
        return False
    if not any((path / name).is_file() for name in WEIGHT_FILES):
        return False
    try:
        config = json.loads((path / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(config, dict) and "architecture" in config and "task" not in config


def read_delft_dir(path: str | Path) -> tuple[dict, dict, dict[str, torch.Tensor]]:
    """DeLFT's config, preprocessor and state dict (tensor name -> tensor) of a model directory."""
    path = Path(path)
    if not is_delft_model_dir(path):
        raise ModelFormatError(f"{path}: not a DeLFT model directory ({CONFIG_FILE}, {PREPROCESSOR_FILE} "
                               f"and one of {', '.join(WEIGHT_FILES)})")
    config = json.loads((path / CONFIG_FILE).read_text(encoding="utf-8"))
    preprocessor = json.loads((path / PREPROCESSOR_FILE).read_text(encoding="utf-8"))
    return config, preprocessor, read_weights(path, config)


def read_weights(path: Path, config: dict) -> dict[str, torch.Tensor]:
    """The state dict, from whichever weight file the directory has (safetensors first)."""
    if (path / "model.safetensors").is_file():
        from safetensors.torch import load_file

        return load_file(str(path / "model.safetensors"))
    if (path / "model_weights.pt").is_file():
        try:
            state = torch.load(path / "model_weights.pt", map_location="cpu", weights_only=True)
        except (pickle.UnpicklingError, RuntimeError, ValueError, EOFError) as exc:  # more than tensors: refused
            raise ModelFormatError(f"{path}/model_weights.pt: not a plain state dict ({exc})") from None
        if not isinstance(state, dict):
            raise ModelFormatError(f"{path}/model_weights.pt: expected a state dict, got {type(state).__name__}")
        return state
    from textorch.tagging.delft_import.keras_weights import read_keras_state

    return read_keras_state(path / "model_weights.hdf5", config)


def _layout(architecture: str, config: dict, state: dict[str, torch.Tensor]) -> Layout:
    if architecture not in _LAYOUTS:
        reason = next((why for key, why in _WHY_NOT.items() if key in architecture), None)
        if architecture.startswith("BERT"):
            reason = "of the transformer family, only BERT_CRF is imported"
        raise ConfigError(f"cannot import DeLFT architecture {architecture!r}: "
                          f"{reason or 'textorch has no mapping for it'}; importable: {', '.join(_LAYOUTS)}")
    if config.get("continuous_features_indices"):
        raise ConfigError("cannot import a DeLFT model with continuous_features_indices (numeric feature columns)")
    if config.get("text_features_indices") or config.get("contextual_embedding_settings"):
        raise ConfigError("cannot import a DeLFT model with text feature columns or contextual embeddings")
    chars, casing, features, recurrent, dense, output = _LAYOUTS[architecture]
    width = state[f"{recurrent[0]}.weight_ih_l0"].shape[1]
    if chars == "cnn":
        width -= state["char_encoder.conv.weight"].shape[0]
    else:
        width -= 2 * state["char_encoder.bilstm.weight_hh_l0"].shape[1]
    if casing:
        width -= state["casing_embedding.weight"].shape[1]
    if features:
        width -= 2 * state["features_lstm.weight_hh_l0"].shape[1]
    return Layout(int(width), chars, casing, features, recurrent, dense, output)


def _from_grobid(tags: list[str]) -> bool:
    """Whether the labels are GROBID's (``B-<date>``, ``I-<title>``): the model reads GROBID
    lines then, feature columns it does not use included, and answers in GROBID's label style."""
    names = [tag[2:] for tag in tags if tag[1:2] == "-"]
    return bool(names) and all(is_grobid_label(name) for name in names)


def _indexed(vocab: dict[str, int], where: str) -> list[str]:
    """Items of a DeLFT vocabulary (item -> index) in index order; the indices must be 0..n-1."""
    items: list[str | None] = [None] * len(vocab)
    for item, index in vocab.items():
        if not 0 <= int(index) < len(items) or items[int(index)] is not None:
            raise ModelFormatError(f"{PREPROCESSOR_FILE}: {where} indices are not 0..{len(items) - 1}")
        items[int(index)] = item
    return items  # type: ignore[return-value]


def _char_vocabulary(preprocessor: dict) -> Vocabulary:
    """DeLFT's ids (``<PAD>`` 0, ``<UNK>`` 1, then the characters) under textorch's specials."""
    items = _indexed(preprocessor["vocab_char"], "vocab_char")
    if items[:2] != ["<PAD>", "<UNK>"]:
        raise ModelFormatError(f"{PREPROCESSOR_FILE}: vocab_char does not start with <PAD>, <UNK>")
    return Vocabulary.from_json({"items": [PAD, UNK, *items[2:]], "with_specials": True})


def _feature_vocabularies(preprocessor: dict) -> tuple[list[int], list[Vocabulary], list[list[int]]]:
    """Feature columns, textorch's vocabulary of each, and for each the rows of DeLFT's shared
    table that its ids take: padding and unknown values both read DeLFT's row 0."""
    features = preprocessor.get("feature_preprocessor") or {}
    mapping = {int(k): v for k, v in (features.get("features_map_to_index") or {}).items()}
    columns = sorted({int(c) for c in features.get("features_indices") or []})
    if not columns:
        raise ModelFormatError(f"{PREPROCESSOR_FILE}: a _FEATURES model without feature columns")
    vocabularies, rows = [], []
    for column in columns:
        values = sorted(mapping.get(column, {}).items(), key=lambda kv: kv[1])
        vocabularies.append(Vocabulary([value for value, _ in values]))
        rows.append([0, 0, *(int(index) for _, index in values)])
    return columns, vocabularies, rows


def _open_embeddings(spec: Any, config: dict, src_dir: Path) -> Any:
    """The word vectors for the imported model: ``spec`` (an opened source, a path or a
    name), else DeLFT's embeddings name, resolved by the one rule of
    :func:`textorch.embeddings.registry.resolve_spec` (the bridge's DeLFT registry included)."""
    if spec is not None and not isinstance(spec, (str, Path)):
        return spec
    from textorch.embeddings import open_embeddings

    name = _vectors_name(spec, config)
    if not name:
        raise ConfigError("the DeLFT model takes word vectors but names none: give them with --embeddings PATH")
    try:
        return open_embeddings(name)
    except ConfigError as exc:
        raise _unresolved(spec, config, exc, src_dir) from None


def _vectors_name(spec: Any, config: dict) -> str | None:
    """The vectors asked for: ``spec`` (a path or a name), else DeLFT's embeddings name."""
    return str(spec) if spec is not None else config.get("embeddings_name")


def _unresolved(spec: Any, config: dict, cause: ConfigError, src_dir: Path) -> ConfigError:
    """The error of vectors not found, worded for where the model is loaded: inside a bridge
    (GROBID: no command line, a registry to write) or from textorch's commands. Vectors the
    caller named (``spec``) keep the error about that name."""
    from textorch.embeddings.delft_registry import bridge_registry

    if spec is not None:
        return cause
    where = src_dir.absolute()
    if bridge_registry() is not None:
        return ConfigError(f"DeLFT model {where}: {cause}")
    return ConfigError(f"DeLFT model {where} uses the word embeddings {config.get('embeddings_name')!r}: {cause}. "
                       f"Or convert it once with its vectors file: textorch import-delft {where} OUT --embeddings PATH")


def _bert_tagger(src_dir: Path, config: dict, preprocessor: dict, state: dict[str, torch.Tensor],
                 input_format: str | None) -> TaggerParts:
    """DeLFT's BERT_CRF: its transformer's saved configuration and tokenizer, the weights, and
    textorch's CRF over sub-tokens (``transformer_crf="subtokens"``), which is DeLFT's."""
    from transformers import AutoConfig, AutoModel

    from textorch.models.transformer_source import TransformerParts, load_tokenizer
    from textorch.tagging.network import build_network

    files = (src_dir / "transformer-config.json", src_dir / "transformer-tokenizer")
    if not files[0].is_file() or not files[1].is_dir():
        raise ModelFormatError(f"{src_dir}: a DeLFT BERT model holds transformer-config.json and transformer-tokenizer/")
    transformer_config = AutoConfig.from_pretrained(str(files[0]))
    parts = TransformerParts.create(transformer_config, load_tokenizer(str(files[1])))
    shell = AutoModel.from_config(transformer_config, dtype=torch.float32)
    tags = _indexed(preprocessor["vocab_tag"], "vocab_tag")
    order = label_order(tags)
    encoder = SequenceEncoder(_char_vocabulary(preprocessor), Vocabulary([tags[i] for i in order], with_specials=False),
                              [], [], int(preprocessor.get("max_char_length") or 30))
    model_config = ModelConfig(architecture="BERT_CRF", transformer=config.get("transformer_name"),
                               transformer_window=parts.window, transformer_crf="subtokens")
    model = build_network(model_config, encoder, 0, parts, shell)
    try:
        model.load_state_dict(map_bert_state(state, order), strict=True)
    except RuntimeError as exc:
        raise ModelFormatError(f"{src_dir}: the DeLFT weights do not fit BERT_CRF ({exc})") from None
    model.eval()
    input_format = input_format or ("grobid" if _from_grobid(tags) else "conll")
    data_config = DataConfig(format=input_format, embeddings="none", word_lookup="delft")
    return TaggerParts(encoder, model, model_config, data_config, None, input_format, 0, transformer=parts)


def build_tagger(src_dir: str | Path, embeddings: Any = None, input_format: str | None = None,
                 n_features: int | None = None) -> TaggerParts:
    """The textorch tagger equivalent to the DeLFT model at ``src_dir``, to be written."""
    from textorch.tagging.network import build_network

    config, preprocessor, state = read_delft_dir(src_dir)
    architecture = str(config["architecture"])
    if architecture == "BERT_CRF":
        return _bert_tagger(Path(src_dir), config, preprocessor, state, input_format)
    layout = _layout(architecture, config, state)
    tags = _indexed(preprocessor["vocab_tag"], "vocab_tag")
    order = label_order(tags)
    columns, vocabularies, feature_rows = _feature_vocabularies(preprocessor) if layout.features else ([], [], None)
    max_chars = int(preprocessor.get("max_char_length") or config.get("max_char_length") or 30)
    encoder = SequenceEncoder(_char_vocabulary(preprocessor), Vocabulary([tags[i] for i in order], with_specials=False),
                              vocabularies, columns, max_chars)
    char_table = state["char_encoder.char_embeddings.weight"]
    model_config = ModelConfig(
        architecture=architecture,
        char_dim=int(char_table.shape[1]),
        char_hidden=int(state["char_encoder.bilstm.weight_hh_l0"].shape[1]) if layout.char_encoder == "lstm" else 25,
        char_cnn_filters=int(state["char_encoder.conv.weight"].shape[0]) if layout.char_encoder == "cnn" else 0,
        char_cnn_pooling="padded" if layout.char_encoder == "cnn" else "chars",
        word_hidden=int(state[f"{layout.recurrent[0]}.weight_hh_l0"].shape[1]),
        word_layers=len(layout.recurrent),
        dense_hidden=int(state[f"{layout.dense}.weight"].shape[0]) if layout.dense else 0,
        casing_dim=int(state["casing_embedding.weight"].shape[1]) if layout.casing else 8,
        feature_encoder="lstm" if layout.features else "dense",
        feature_dim=int(state["features_embedding.weight"].shape[1]) if layout.features else 4,
        feature_output_dim=2 * int(state["features_lstm.weight_hh_l0"].shape[1]) if layout.features else 32,
        dropout=float(config.get("dropout") or 0.5),
        max_char_length=max_chars,
    )
    vectors = None
    if layout.word_dim:
        vectors = _open_embeddings(embeddings, config, Path(src_dir))
        if vectors.dim != layout.word_dim:
            raise ConfigError(f"the DeLFT model takes word vectors of {layout.word_dim} dimensions, "
                              f"{getattr(vectors, 'name', 'the embeddings given')} have {vectors.dim}")
    input_format = input_format or ("grobid" if layout.features or _from_grobid(tags) else "conll")
    n_features = n_features if n_features is not None else (max(columns) + 1 if columns else 0)
    data_config = DataConfig(format=input_format, embeddings=getattr(vectors, "name", None) or "none",
                             word_lookup="delft")
    model = build_network(model_config, encoder, layout.word_dim)
    mapped = map_state(state, layout, order, feature_rows)
    try:
        model.load_state_dict(mapped, strict=True)
    except RuntimeError as exc:
        raise ModelFormatError(f"{src_dir}: the DeLFT weights do not fit {architecture} ({exc})") from None
    model.eval()
    return TaggerParts(encoder, model, model_config, data_config, vectors, input_format, n_features,
                       delft_source={"format_version": 1, "config": config, "preprocessor": preprocessor})


def delft_source(model_dir: str | Path) -> dict | None:
    """DeLFT's ``config`` and ``preprocessor`` of a DeLFT model directory, or the importer's
    record of them in a textorch directory imported from DeLFT; None for any other model
    (a textorch-trained one, or one imported before the record was kept)."""
    path = Path(model_dir)
    if is_delft_model_dir(path):
        return {"format_version": 1, "config": json.loads((path / CONFIG_FILE).read_text(encoding="utf-8")),
                "preprocessor": json.loads((path / PREPROCESSOR_FILE).read_text(encoding="utf-8"))}
    record = path / DELFT_SOURCE_FILE
    if not record.is_file():
        return None
    try:
        return json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelFormatError(f"{record}: unreadable ({exc})") from None


def convert_delft_model(src_dir: str | Path, out_dir: str | Path, embeddings: Any = None,
                        input_format: str | None = None, n_features: int | None = None) -> Path:
    """Write the textorch model directory of the DeLFT model at ``src_dir`` to ``out_dir``
    (atomically; ``src_dir`` is only read). ``embeddings``: the word vectors (an opened
    source, a path or a name; default DeLFT's embeddings name, resolved by
    :func:`textorch.embeddings.registry.resolve_spec`). ``input_format``/``n_features``: what
    ``seq tag`` reads (default: GROBID for ``_FEATURES`` models, with columns up to the last one
    used, and for models with GROBID labels, with any columns; else CoNLL)."""
    return write_tagger_dir(out_dir, build_tagger(src_dir, embeddings, input_format, n_features))


def source_digest(src_dir: str | Path) -> str:
    """A hash of the files that define a DeLFT model: its cache key once converted."""
    digest = hashlib.sha256()
    tokenizer = sorted(p.relative_to(src_dir).as_posix() for p in (Path(src_dir) / "transformer-tokenizer").rglob("*")
                       if p.is_file())
    for name in (CONFIG_FILE, PREPROCESSOR_FILE, *WEIGHT_FILES, "transformer-config.json", *tokenizer):
        path = Path(src_dir) / name
        if path.is_file():
            digest.update(name.encode())
            with open(path, "rb") as stream:
                for block in iter(lambda: stream.read(1 << 20), b""):
                    digest.update(block)
    return digest.hexdigest()


IMPORT_VERSION = 1
"""Part of a converted model's cache key: bump when a conversion rule changes."""


def converted_dir(src_dir: str | Path, cache_dir: str | Path | None = None, embeddings: Any = None) -> Path:
    """The textorch directory of a DeLFT model, converted once into the cache and reused; what
    ``seq tag --model DELFT_DIR`` and the bridge's ``load`` read.

    The key covers everything the conversion reads: the DeLFT files and the identity of the
    word vectors the embeddings name resolves to now (their content fingerprint), so a name
    pointed at other vectors gets a new conversion, never the old one.
    """
    from textorch.embeddings.cache import resolve_cache_dir

    key = f"{IMPORT_VERSION}\0{source_digest(src_dir)}\0{_vectors_identity(src_dir, embeddings)}"
    target = resolve_cache_dir(cache_dir) / DELFT_IMPORTS_FOLDER / hashlib.sha256(key.encode()).hexdigest()[:32]
    if not (target / CONFIG_FILE).is_file():
        convert_delft_model(src_dir, target, embeddings)
    return target


def _vectors_identity(src_dir: str | Path, embeddings: Any) -> str:
    """The content fingerprint of the vectors a conversion of ``src_dir`` would read ("none": none)."""
    if embeddings is not None and not isinstance(embeddings, (str, Path)):
        return str(getattr(embeddings, "fingerprint", None) or id(embeddings))
    config = json.loads((Path(src_dir) / CONFIG_FILE).read_text(encoding="utf-8"))
    name = _vectors_name(embeddings, config)
    if not name or str(config.get("architecture", "")).startswith("BERT"):  # DeLFT's transformers take none
        return "none"
    from textorch.embeddings import fingerprint_file, resolve_spec

    try:
        return fingerprint_file(resolve_spec(name).path)
    except ConfigError as exc:
        raise _unresolved(embeddings, config, exc, Path(src_dir)) from None
