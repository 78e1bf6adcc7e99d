"""Export a text classifier to ONNX: the whole ensemble up to its logits and probabilities.

Every member of an n-fold ensemble is in the one graph, combined as
:class:`~textorch.models.classifiers.ClassifierEnsemble` combines them, so another program
needs no knowledge of folds. Recurrent layers run on padded tensors
(:mod:`textorch.models.export_layers`); the convolution, pooling and dense layers are the trained
modules themselves, which already respect the mask. See ``docs/onnx.md`` for the layout.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from textorch.data.cls_batching import WordEncoder
from textorch.errors import ConfigError
from textorch.models.classifiers import (
    ClassifierEnsemble,
    GRULastState,
    Recurrent,
    TextClassifierNet,
    TransformerClassifierNet,
)
from textorch.onnx.files import DESCRIPTION_FILE, TOKENIZER_FILE, Graph, describe, tokenizer_json, write_export
from textorch.models.export_layers import PaddedRNN, last_step

TEXT_TOKENIZER = {
    "kind": "textorch",
    "rules": "whitespace separates tokens; a run of letters and digits (Unicode L*, N*) is one token; any other "
             "character is a token of its own, except combining marks, format characters (Cf) and emoji skin-tone "
             "modifiers, which stay with the character before them, and a character after a zero-width joiner",
    "reference": "textorch.data.tokenize.tokenize",
}
"""How the recurrent classifiers split a text into words (docs/onnx.md has the details)."""


class _PaddedRecurrent(nn.Module):
    """:class:`Recurrent` (a sequence layer) on padded input."""

    def __init__(self, layer: Recurrent) -> None:
        super().__init__()
        self.rnn = PaddedRNN(layer.rnn)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.rnn(x, mask), mask


class _PaddedLastState(nn.Module):
    """:class:`GRULastState` on padded input: the output at each text's last real step."""

    def __init__(self, pooling: GRULastState) -> None:
        super().__init__()
        self.rnn = pooling.rnn

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(x)
        return last_step(out, mask.sum(dim=1))


class _WordMember(nn.Module):
    """One :class:`TextClassifierNet` from ``words`` (ids or vectors) and a bool mask."""

    def __init__(self, net: TextClassifierNet) -> None:
        super().__init__()
        self.embedding = net.word_input.embedding
        self.layers = nn.ModuleList(_PaddedRecurrent(layer) if isinstance(layer, Recurrent) else layer for layer in net.layers)
        self.pooling = _PaddedLastState(net.pooling) if isinstance(net.pooling, GRULastState) else net.pooling
        self.head = net.head

    def forward(self, words: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.embedding(words) if self.embedding is not None else words
        for layer in self.layers:
            x, mask = layer(x, mask)
        return self.head(self.pooling(x, mask))


class ExportableClassifier(nn.Module):
    """Ensemble logits and probabilities (B, C) from plain tensors (see :attr:`input_names`)."""

    def __init__(self, ensemble: ClassifierEnsemble, pretrained_vectors: bool) -> None:
        super().__init__()
        members = list(ensemble.members)
        self.multi_label = ensemble.multi_label
        if all(isinstance(m, TransformerClassifierNet) for m in members):
            self.members = nn.ModuleList(members)
            self.input_names = ["input_ids", "attention_mask"]
            self.transformer = True
        elif all(isinstance(m, TextClassifierNet) for m in members):
            self.members = nn.ModuleList(_WordMember(m) for m in members)
            self.input_names = ["word_vectors" if pretrained_vectors else "token_ids", "mask"]
            self.transformer = False
        else:
            raise ConfigError(f"ONNX export does not know the classifier network {type(members[0]).__name__}")

    def forward(self, words: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.transformer:
            logits = [m.logits(words, mask) for m in self.members]
        else:
            logits = [m(words, mask.bool()) for m in self.members]
        combined = logits[0] if len(logits) == 1 else self._combine(torch.stack([x.float() for x in logits]))
        probabilities = torch.sigmoid(combined) if self.multi_label else torch.softmax(combined, dim=-1)
        return combined, probabilities

    def _combine(self, logits: torch.Tensor) -> torch.Tensor:
        """:meth:`ClassifierEnsemble.forward`'s normalised geometric mean, in ONNX operations: ONNX
        has no ``expm1``, so ``log(1 - p)`` is computed from ``p`` (equal in float32 to within 1e-6
        for the probabilities, which is what the tests compare). The mean over members is a sum
        divided by their number: a mean is a ``ReduceMean`` node, which the exporter writes at
        opset 18 only, a sum a ``ReduceSum`` it writes at the opset of the export."""
        members = logits.shape[0]
        if not self.multi_label:
            return F.log_softmax(logits, dim=-1).sum(dim=0) / members
        log_p = (F.logsigmoid(logits).sum(dim=0) / members).clamp(max=-1e-7)
        return log_p - torch.log(1.0 - torch.exp(log_p))


def _example_inputs(module: ExportableClassifier, word_dim: int, specials: tuple[int, int, int]) -> dict[str, torch.Tensor]:
    """Two texts of unequal length (the second padded), so the trace takes the general path."""
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    if module.transformer:
        first, last, pad = specials
        ids = torch.tensor([[first, pad, pad, last], [first, pad, last, pad]])
        return {"input_ids": ids, "attention_mask": mask}
    words = torch.zeros(2, 4, word_dim) if module.input_names[0] == "word_vectors" else torch.ones(2, 4, dtype=torch.long) * mask
    return {module.input_names[0]: words, "mask": mask}


_INPUT_DOCS = {
    "token_ids": {"dtype": "int64", "shape": ["batch", "length"], "from": "vocab.json words (the index of a word); 1 (<unk>) for an unknown word, 0 pads"},
    "word_vectors": {"dtype": "float32", "shape": ["batch", "length", "dim"], "from": "embeddings (exact word, else lower-cased, else zeros); zeros pad"},
    "mask": {"dtype": "int64", "shape": ["batch", "length"], "from": "1 for tokens, 0 for padding (a prefix of ones)"},
    "input_ids": {"dtype": "int64", "shape": ["batch", "length"], "from": "tokenizer.json sub-tokens, special tokens included; pad_id pads"},
    "attention_mask": {"dtype": "int64", "shape": ["batch", "length"], "from": "1 for sub-tokens, 0 for padding"},
}


def classifier_graph(classifier) -> Graph:
    """The graph of a loaded :class:`~textorch.classification.classifier.TextClassifier`, with example inputs."""
    ensemble = classifier.network.cpu()
    module = ExportableClassifier(ensemble, classifier.embeddings is not None).eval()
    word_dim = classifier.embeddings.dim if classifier.embeddings is not None else 0
    specials = (0, 0, 0)
    if module.transformer:
        tokenizer = classifier.text_encoder.tokenizer
        ids = tokenizer("a")["input_ids"]
        specials = (ids[0], ids[-1], classifier.text_encoder.pad_id)
    inputs = _example_inputs(module, word_dim, specials)
    n = len(classifier.classes)
    axes = {name: {0: "batch", 1: "length"} for name in inputs}
    outputs = {
        "logits": {"dtype": "float32", "shape": ["batch", n], "note": "the ensemble's (log of the combined probabilities with several members)"},
        "probabilities": {"dtype": "float32", "shape": ["batch", n], "note": "sigmoid (multi-label) or softmax of the logits"},
    }
    return Graph(module, inputs, list(outputs), {**axes, **{k: {0: "batch"} for k in outputs}}, _INPUT_DOCS, outputs)


def export_classifier(classifier, output: str | Path, quantize: bool = False, source_dir: str | Path | None = None) -> Path:
    """Write the ONNX export of a loaded :class:`~textorch.classification.classifier.TextClassifier` atomically."""
    graph = classifier_graph(classifier)
    model_config = classifier.model_config
    description = describe("text_classification", model_config.architecture, graph, quantize, source_dir)
    description.update({
        "multi_label": classifier.multi_label,
        "decision": "probability >= thresholds[k]" if classifier.multi_label else "argmax",
        "thresholds": classifier.thresholds.tolist() if classifier.multi_label else None,
        "members": len(classifier.network.members),
        "member_thresholds": classifier.member_thresholds.tolist() if classifier.multi_label else None,
        "max_length": classifier.text_encoder.max_length,
        "embeddings": classifier.embeddings.describe() if classifier.embeddings is not None else None,
    })
    files: dict[str, object] = {"labels.json": classifier.classes}
    binary = {}
    if isinstance(classifier.text_encoder, WordEncoder):
        vocab = classifier.text_encoder.vocab
        description["tokenizer"] = {**TEXT_TOKENIZER, "max_tokens": classifier.text_encoder.max_length,
                                    "empty_text": "<unk>"}
        files["vocab.json"] = {"words": vocab.items if vocab is not None else None, "pad_id": 0,
                               "unknown_id": vocab.unk_id if vocab is not None else None}
    else:
        encoder = classifier.text_encoder
        description["tokenizer"] = {
            "file": TOKENIZER_FILE, "kind": "huggingface-tokenizers", "add_special_tokens": True,
            "truncation": encoder.max_length, "pad_id": encoder.pad_id,
            "input": "the text, encoded with special tokens; tokenizer.json truncates to max_length sub-tokens",
        }
        binary[TOKENIZER_FILE] = tokenizer_json(encoder.tokenizer, truncate_at=encoder.max_length)
    files[DESCRIPTION_FILE] = description
    return write_export(output, graph, files, quantize, binary)
