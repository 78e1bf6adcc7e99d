"""``textorch export onnx --model DIR``: the ONNX graph and plain-JSON data of a tagger or classifier,
and the ``--engine`` options of the commands that run a saved model, handed to the owner of the
engine choice (:mod:`textorch.onnx.opening`, through the task openers)."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from textorch.cli.commands import group_help
from textorch.onnx.opening import DEFAULT_ENGINE, ENGINES, EngineOptions
from textorch.train.dist import DistContext, session

logger = logging.getLogger(__name__)


def load_saved_model(directory: str | Path, device: str = "cpu", cache_dir: str | None = None):
    """A ``SequenceLabeler`` or a ``TextClassifier``, whichever task the directory's config names
    (a DeLFT tagger's directory is converted, as ``seq tag`` does)."""
    from textorch.errors import ModelFormatError
    from textorch.model_dir import read_model_config
    from textorch.tagging.delft_import.importer import is_delft_model_dir

    task = "sequence_labelling" if is_delft_model_dir(directory) else read_model_config(directory).get("task")
    if task == "sequence_labelling":
        from textorch.tagging.labeler import SequenceLabeler

        return SequenceLabeler.load(directory, device=device, cache_dir=cache_dir, engine="torch")
    if task == "text_classification":
        from textorch.classification.classifier import TextClassifier

        return TextClassifier.load(directory, device=device, cache_dir=cache_dir, engine="torch")
    raise ModelFormatError(f"{directory}: cannot export a model of task {task!r}")


def _export_onnx(args: argparse.Namespace) -> int:
    from textorch.onnx.engine import default_export_dir, export_model

    if args.layout == "delft":
        return _export_delft_layout(args)
    predictor = load_saved_model(args.model, cache_dir=args.cache_dir)
    output = Path(args.output) if args.output else default_export_dir(args.model)
    export_model(predictor, output, quantize=args.quantize, source_dir=args.model)
    print(output)
    return 0


def _export_delft_layout(args: argparse.Namespace) -> int:
    """DeLFT's layout (encoder.onnx, crf_params.json, vocab.json, config.json) for DeLFT's Java
    runner; a model imported from DeLFT gets DeLFT's own names and ids back."""
    from textorch.errors import ConfigError
    from textorch.onnx.delft_layout import export_delft_layout
    from textorch.tagging.delft_import.importer import delft_source

    if args.quantize:
        raise ConfigError("--quantize is not part of DeLFT's layout (it has no int8 model); export without it")
    if not args.output:
        raise ConfigError("--layout delft needs --output DIR (MODEL/onnx is the textorch layout's place)")
    source = delft_source(args.model)
    predictor = load_saved_model(args.model, cache_dir=args.cache_dir)
    if getattr(predictor, "task", None) != "sequence_labelling":
        raise ConfigError("--layout delft exports sequence labelling models only (DeLFT's runner is a tagger)")
    export_delft_layout(predictor, args.output, source, model_name=Path(args.model).resolve().name)
    print(args.output)
    return 0


def add_engine_options(parser: argparse.ArgumentParser, with_onnx_dir: bool = True, with_precision: bool = True) -> None:
    """``--engine``/``--onnx-dir``/``--quantized``/``--precision`` for commands that run a saved model
    (``with_precision=False``: a command that has ``--precision`` already, training's, which
    tagging then reads too)."""
    group = parser.add_argument_group("inference engine")
    group.add_argument("--engine", default=DEFAULT_ENGINE, choices=list(ENGINES),
                       help="auto: ONNX Runtime where it is faster (a tagger's calls of up to 1,024 tokens, every "
                            "call of a classifier; tagging a file with a current export in MODEL/onnx runs without "
                            "importing PyTorch), exported into MODEL/onnx on first use; PyTorch on a GPU, with "
                            "--precision bf16, for transformers, or where the export fails (logged). torch: PyTorch "
                            "only. onnx: ONNX Runtime for every call (CPU; exports into MODEL/onnx when absent) "
                            f"(default: {DEFAULT_ENGINE})")
    if with_onnx_dir:
        group.add_argument("--onnx-dir", default=None, metavar="DIR",
                           help="ONNX export to use with --engine onnx (default: MODEL/onnx)")
    group.add_argument("--quantized", action="store_true",
                       help="with --engine onnx: use the int8 model (dynamic quantisation)")
    if with_precision:
        group.add_argument("--precision", default="fp32", choices=["fp32", "bf16"],
                           help="with --engine torch (or auto, which then runs every call in PyTorch): fp32 (exact) or "
                                "bf16 autocast, faster on CPUs with native bfloat16 (AVX512-BF16, AMX) and on GPUs; "
                                "labels may differ slightly (default: fp32)")


def engine_options(args: argparse.Namespace, device: object | None = None) -> EngineOptions:
    """The engine options a command line gave (``device``: the session's, once resolved)."""
    return EngineOptions(getattr(args, "engine", DEFAULT_ENGINE), args.device if device is None else device,
                         args.precision, args.quantized,
                         getattr(args, "onnx_dir", None), args.threads)


@contextmanager
def opened_tagger(args: argparse.Namespace, model_dir: str, predict_only: bool) -> Iterator[tuple[DistContext, Any]]:
    """The tagger of ``model_dir`` as the command line asks, in the place it runs: the torch-free
    tagger in this one process where :mod:`textorch.onnx.opening` takes it (``predict_only``),
    else the ``SequenceLabeler`` inside the PyTorch session (threads, device, process group)."""
    from textorch.tagging.opening import open_tagger, torch_free_tagger

    options = engine_options(args)
    tagger = torch_free_tagger(model_dir, options, cache_dir=args.cache_dir) if predict_only else None
    if tagger is not None:
        yield DistContext(), tagger
        return
    options.check()  # before the session takes a device
    with session(options.session_device(), args.threads) as (ctx, device):
        yield ctx, open_tagger(model_dir, engine_options(args, device), cache_dir=args.cache_dir).predictor


@contextmanager
def opened_classifier(args: argparse.Namespace) -> Iterator[tuple[DistContext, Any]]:
    """The classifier of ``--model`` as the command line asks, inside the PyTorch session."""
    from textorch.classification.opening import open_classifier

    options = engine_options(args)
    options.check()  # before the session takes a device
    with session(options.session_device(), args.threads) as (ctx, device):
        yield ctx, open_classifier(args.model, engine_options(args, device), cache_dir=args.cache_dir).predictor


def register(groups: argparse._SubParsersAction) -> None:
    export = groups.add_parser("export", help=group_help("export"))
    commands = export.add_subparsers(dest="command", metavar="FORMAT", required=True)
    p = commands.add_parser("onnx", help="ONNX graph plus labels/vocabularies/tokenizer/CRF as JSON (see docs/onnx.md)")
    p.add_argument("--model", required=True, help="model directory (a tagger or a text classifier)")
    p.add_argument("--output", default=None, help="export directory, replaced atomically (default: MODEL/onnx; "
                                                  "required with --layout delft)")
    p.add_argument("--quantize", action="store_true", help="also write model.int8.onnx (dynamic int8 quantisation)")
    p.add_argument("--layout", default="textorch", choices=["textorch", "delft"],
                   help="textorch: model.onnx + onnx-model.json and vocabularies (default); delft: DeLFT 1.2's "
                        "encoder.onnx, crf_params.json, vocab.json, config.json, read by DeLFT's Java runner "
                        "(BidLSTM_CRF[_FEATURES] and the ChainCRF names; see docs/onnx.md)")
    p.add_argument("--cache-dir", default=None, help="textorch's cache root, holding embeddings/ and delft-imports/ "
                        "(default: $TEXTORCH_CACHE_DIR, else ~/.cache/textorch)")
    p.set_defaults(run=_export_onnx)
