"""Where a transformer comes from, and how its files travel inside a saved model directory.

At build time ``--transformer`` names a local directory, a name from a registry file the user
owns, or (with network access) a Hugging Face hub name. The saved model then holds everything
needed to rebuild it — the encoder's config and tokenizer files under ``transformer/``, the
fine-tuned weights inside ``model.safetensors`` — so loading needs no network and no registry.
A registry maps names to local directories::

    {"transformers": [{"name": "minilm", "path": "/models/all-MiniLM-L6-v2"}]}

read from ``$TEXTORCH_TRANSFORMERS_REGISTRY`` or ``~/.config/textorch/transformers.json``;
relative paths are taken from the registry file's folder.

``transformers`` is imported inside the functions: the recurrent architectures and the CLI
start without paying for it.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from textorch.data.subwords import SpecialTokens, SubwordSequence, WindowCollator, align_words, check_window
from textorch.errors import ConfigError, ModelFormatError

logger = logging.getLogger(__name__)

ENV_REGISTRY = "TEXTORCH_TRANSFORMERS_REGISTRY"
SUBDIR = "transformer"
"""Folder of a model directory holding the encoder's config and tokenizer files."""
_FALLBACK_MAX_LENGTH = 512


def default_registry_path() -> Path:
    return Path.home() / ".config" / "textorch" / "transformers.json"


def _registry_entries(path: Path) -> dict[str, Path]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read transformers registry {path}: {exc}") from None
    entries = data.get("transformers") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise ConfigError(f'transformers registry {path}: expected {{"transformers": [...]}}')
    known: dict[str, Path] = {}
    for index, entry in enumerate(entries):
        name = entry.get("name") if isinstance(entry, dict) else None
        where = entry.get("path") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not isinstance(where, str) or not name or not where:
            raise ConfigError(f"transformers registry {path}, entry {index}: needs non-empty 'name' and 'path'")
        resolved = Path(where).expanduser()
        known[name] = resolved if resolved.is_absolute() else path.parent / resolved
    return known


def resolve_transformer(spec: str, registry: str | Path | None = None) -> str:
    """A local directory, else a registry name's directory, else ``spec`` itself as a hub name."""
    as_path = Path(spec).expanduser()
    if as_path.is_dir():
        return str(as_path.resolve())
    location = Path(registry).expanduser() if registry else None
    if location is None and os.environ.get(ENV_REGISTRY):
        location = Path(os.environ[ENV_REGISTRY]).expanduser()
    if location is not None and not location.is_file():
        raise ConfigError(f"transformers registry {location} does not exist")
    if location is None and default_registry_path().is_file():
        location = default_registry_path()
    known = _registry_entries(location) if location is not None else {}
    if spec in known:
        if not known[spec].is_dir():
            raise ConfigError(f"transformer {spec!r} from registry {location}: directory {known[spec]} not found")
        return str(known[spec])
    if spec.startswith((".", "/", "~")):
        raise ConfigError(f"--transformer {spec}: directory not found")
    return spec


def load_tokenizer(path: str) -> Any:
    """The model's own fast tokenizer (its normaliser decides casing); word alignment needs offsets."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    if not getattr(tokenizer, "is_fast", False):
        raise ConfigError(f"{path}: the tokenizer is not a fast tokenizer (tokenizer.json); word alignment needs one")
    try:
        tokenizer([["probe"]], is_split_into_words=True, add_special_tokens=False)
    except ValueError:
        # Byte-level BPE tokenizers (RoBERTa, GPT-2 family) accept pre-split words only with this.
        tokenizer = AutoTokenizer.from_pretrained(path, add_prefix_space=True)
    return tokenizer


def _max_length(config: Any, tokenizer: Any) -> int:
    """The encoder's limit in sub-tokens, special tokens included."""
    limits = [getattr(config, "max_position_embeddings", None), getattr(tokenizer, "model_max_length", None)]
    usable = [int(v) for v in limits if isinstance(v, int) and 0 < v < 1_000_000]
    return min(usable) if usable else _FALLBACK_MAX_LENGTH


@dataclass
class TransformerParts:
    """Everything of a transformer tagger that is not a weight: encoder config, tokenizer, windows."""

    config: Any  # transformers.PretrainedConfig
    tokenizer: Any  # a fast tokenizer
    window: int
    stride: int
    specials: SpecialTokens

    @classmethod
    def create(cls, config: Any, tokenizer: Any, window: int = 0, stride: int = 0) -> "TransformerParts":
        """Resolve ``window``/``stride`` (0: the encoder's limit / half a window) and check them."""
        limit = _max_length(config, tokenizer)
        if window > limit:
            raise ConfigError(f"--transformer-window {window} exceeds the encoder's limit of {limit} sub-tokens")
        specials = SpecialTokens.of(tokenizer)
        window = window or limit
        stride = stride or max(1, (window - specials.count) // 2)
        check_window(window, stride, specials)
        return cls(config, tokenizer, window, stride, specials)

    @property
    def hidden_size(self) -> int:
        return int(self.config.hidden_size)

    @property
    def lowercases(self) -> bool:
        """Whether the tokenizer's own normaliser lower-cases (read from its config, never assumed)."""
        normalizer = getattr(getattr(self.tokenizer, "backend_tokenizer", None), "normalizer", None)
        return normalizer is not None and normalizer.normalize_str("Ab") == "ab"

    def align(self, sequences: list[list[str]]) -> list[SubwordSequence]:
        return align_words(self.tokenizer, sequences, self.specials.unk_id)

    def collator(self, subwords: list[SubwordSequence]) -> WindowCollator:
        return WindowCollator(subwords, self.specials, self.window, self.stride)

    def describe(self) -> dict:
        return {
            "model_type": getattr(self.config, "model_type", None),
            "hidden_size": self.hidden_size,
            "window": self.window,
            "stride": self.stride,
            "lowercases": self.lowercases,
        }

    def files(self) -> dict[str, bytes]:
        """The encoder config and tokenizer files, keyed by their path in the model directory."""
        out = {f"{SUBDIR}/config.json": self.config.to_json_string().encode("utf-8")}
        with tempfile.TemporaryDirectory(prefix="textorch-tokenizer-") as tmp:
            self.tokenizer.save_pretrained(tmp)
            for path in sorted(Path(tmp).rglob("*")):
                if path.is_file():
                    out[f"{SUBDIR}/{path.relative_to(tmp).as_posix()}"] = path.read_bytes()
        return out


def open_pretrained(spec: str, window: int = 0, stride: int = 0) -> tuple[TransformerParts, nn.Module]:
    """Parts and pre-trained encoder for a new model (``--transformer``)."""
    from transformers import AutoConfig, AutoModel

    path = resolve_transformer(spec)
    try:
        config = AutoConfig.from_pretrained(path)
        tokenizer = load_tokenizer(path)
        encoder = AutoModel.from_pretrained(path, dtype=torch.float32)
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"cannot load transformer {spec!r} (not a local model directory, not in the transformers "
            f"registry, and not loadable as a hub name: {exc})"
        ) from None
    parts = TransformerParts.create(config, tokenizer, window, stride)
    logger.info(
        "transformer %s: %s, hidden %d, window %d / stride %d sub-tokens, tokenizer %s",
        spec, getattr(config, "model_type", "?"), parts.hidden_size, parts.window, parts.stride,
        "lower-cases" if parts.lowercases else "keeps case",
    )
    return parts, encoder


def load_saved(directory: str | Path, window: int = 0, stride: int = 0) -> tuple[TransformerParts, nn.Module]:
    """Parts and an encoder with the saved architecture, weights still to load (no network)."""
    from transformers import AutoConfig, AutoModel

    folder = Path(directory) / SUBDIR
    if not (folder / "config.json").is_file():
        raise ModelFormatError(f"{folder}/config.json: missing; a transformer model directory holds its encoder config")
    try:
        config = AutoConfig.from_pretrained(str(folder))
        tokenizer = load_tokenizer(str(folder))
        encoder = AutoModel.from_config(config, dtype=torch.float32)
    except (OSError, ValueError) as exc:
        raise ModelFormatError(f"{folder}: cannot rebuild the transformer ({exc})") from None
    return TransformerParts.create(config, tokenizer, window, stride), encoder
