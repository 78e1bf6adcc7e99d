"""ONNX Runtime as the network runner of a :class:`~textorch.labeler.SequenceLabeler`.

Only the emissions come from ONNX Runtime; decoding reuses the loaded model's own head (CRF
Viterbi and marginals, or softmax), so the labels and scores follow the same code as the
PyTorch engine and ``SequenceLabeler.predict`` stays the one tagging path.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import torch

from textorch.data.batching import Batch
from textorch.errors import ConfigError, ModelFormatError
from textorch.models.heads import CRFHead
from textorch.onnx.export import DESCRIPTION_FILE, FORMAT_VERSION, ONNX_FILE, QUANTIZED_FILE, export_labeler

logger = logging.getLogger(__name__)


class OnnxRunner:
    """``decode(batch) -> (label ids, scores)`` like ``SequenceTagger.decode``, via onnxruntime."""

    def __init__(self, model_file: Path, head: torch.nn.Module, threads: int | None = None) -> None:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        self.session = onnxruntime.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.head = head

    def emissions(self, batch: Batch) -> np.ndarray:
        available = {
            "word_vectors": batch.word_vectors,
            "char_ids": batch.char_ids,
            "casing_ids": batch.casing_ids,
            "feature_ids": batch.feature_ids,
            "mask": batch.mask.long(),
        }
        feed = {}
        for name in self.input_names:
            value = available[name]
            if value is None:
                raise ConfigError(f"the ONNX model needs {name} but the batch has none")
            feed[name] = value.cpu().numpy()
        return self.session.run(["emissions"], feed)[0]

    def decode(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        emissions = torch.from_numpy(self.emissions(batch)).float()
        mask = batch.mask.cpu()
        if isinstance(self.head, CRFHead):
            paths, _ = self.head.crf.decode(emissions, mask)
            marginals = self.head.crf.marginals(emissions, mask)
            return paths, marginals.gather(-1, paths.unsqueeze(-1)).squeeze(-1)
        scores, paths = emissions.softmax(dim=-1).max(dim=-1)
        return paths * mask, scores * mask


def default_export_dir(model_dir: str | Path) -> Path:
    return Path(model_dir) / "onnx"


def attach_onnx(labeler, model_dir: str | Path, export_dir: str | Path | None = None, quantized: bool = False,
                threads: int | None = None) -> None:
    """Make ``labeler`` compute emissions with ONNX Runtime, exporting first when no export exists."""
    directory = Path(export_dir) if export_dir else default_export_dir(model_dir)
    if not (directory / DESCRIPTION_FILE).exists():
        logger.info("no ONNX export in %s: exporting now", directory)
        export_labeler(labeler, directory, quantize=quantized)
    description = json.loads((directory / DESCRIPTION_FILE).read_text(encoding="utf-8"))
    if description.get("format_version") != FORMAT_VERSION:
        raise ModelFormatError(f"{directory}/{DESCRIPTION_FILE}: unknown format version {description.get('format_version')!r}")
    if description.get("architecture") != labeler.model_config.architecture:
        raise ModelFormatError(f"{directory}: the export is of a {description.get('architecture')} model, not this one")
    model_file = directory / (QUANTIZED_FILE if quantized else ONNX_FILE)
    if not model_file.exists():
        raise ModelFormatError(f"{model_file}: missing (export with --quantize to get the int8 model)")
    labeler.runner = OnnxRunner(model_file, labeler.model.head, threads)
