"""``textorch export onnx --model DIR``: the ONNX graph and plain-JSON data of a tagger or classifier,
and the ``--engine`` options of the commands that run a saved model."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

from textorch.cli.commands import group_help

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

        return SequenceLabeler.load(directory, device=device, cache_dir=cache_dir)
    if task == "text_classification":
        from textorch.classification.classifier import TextClassifier

        return TextClassifier.load(directory, device=device, cache_dir=cache_dir)
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


def add_engine_options(parser: argparse.ArgumentParser, with_onnx_dir: bool = True, engine: str = "torch") -> None:
    """``--engine``/``--onnx-dir``/``--quantized``/``--precision`` for commands that run a saved model."""
    group = parser.add_argument_group("inference engine")
    group.add_argument("--engine", default=engine, choices=["torch", "onnx", "auto"],
                       help="run the network with PyTorch or ONNX Runtime (CPU; exports into MODEL/onnx when absent); "
                            "auto: ONNX Runtime where it is faster (a tagger's calls of up to 1,024 tokens, every "
                            "call of a classifier; no transformer, CPU, fp32, onnxruntime installed), PyTorch "
                            "otherwise; 'seq tag' with onnx or auto and a current export runs without importing "
                            f"PyTorch (default: {engine})")
    if with_onnx_dir:
        group.add_argument("--onnx-dir", default=None, metavar="DIR",
                           help="ONNX export to use with --engine onnx (default: MODEL/onnx)")
    group.add_argument("--quantized", action="store_true",
                       help="with --engine onnx: use the int8 model (dynamic quantisation)")
    group.add_argument("--precision", default="fp32", choices=["fp32", "bf16"],
                       help="with --engine torch (or auto, which then runs every call in PyTorch): fp32 (exact) or bf16 autocast, faster on CPUs with native "
                            "bfloat16 (AVX512-BF16, AMX) and on GPUs; labels may differ slightly (default: fp32)")


def apply_engine_options(args: argparse.Namespace, predictor) -> None:
    """Switch a loaded tagger or classifier to ONNX Runtime, or to bf16, when the options ask for it."""
    from textorch.runtime.precision import check_inference_precision
    from textorch.onnx.engine import check_engine, use_engine

    engine, export_dir, quantized = getattr(args, "engine", "torch"), getattr(args, "onnx_dir", None), args.quantized
    check_engine(engine, predictor.device, quantized, export_dir)  # before --precision's own checks
    check_inference_precision(args.precision, predictor.device, engine)
    predictor.precision = args.precision
    use_engine(predictor, args.model, engine, quantized, export_dir, args.threads)


def gpu_visible() -> bool:
    """Whether this process may see a GPU, judged without importing torch (a second of start-up):
    ``CUDA_VISIBLE_DEVICES`` empty or -1 hides them; otherwise an NVIDIA driver's GPU list or
    ROCm's device node says there is one."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    nvidia = Path("/proc/driver/nvidia/gpus")
    return (nvidia.is_dir() and any(nvidia.iterdir())) or Path("/dev/kfd").exists()


def torch_free_tagger(args: argparse.Namespace):
    """With ``--engine onnx`` or ``auto``, the :class:`~textorch.tagging.onnx_tagger.OnnxTagger` that
    runs the model's current export without importing PyTorch (a second or more of start-up, and
    faster than PyTorch on every whole file measured); None where it cannot (several processes,
    ``--precision bf16``, ``--device cuda``, no current export...): the command then loads the
    ``SequenceLabeler``, which exports first where needed."""
    if getattr(args, "engine", "torch") not in ("onnx", "auto") or args.precision != "fp32" or args.device == "cuda":
        return None
    if args.device == "auto" and gpu_visible():
        return None  # --device auto takes the GPU, through PyTorch (and --engine onnx is refused there)
    if args.engine == "auto" and (args.quantized or args.onnx_dir):
        return None  # refused by the engine's own checks, on the SequenceLabeler's path
    from textorch.tagging.onnx_tagger import NotServed, OnnxTagger
    from textorch.train.dist import context_from_env

    if context_from_env().world_size > 1:
        return None
    try:
        tagger = OnnxTagger.open(args.model, args.onnx_dir, args.quantized, args.cache_dir, args.threads)
    except NotServed as why:
        logger.info("%s: loading it with PyTorch (%s)", args.model, why)
        return None
    logger.info("%s runs with ONNX Runtime from its export, without PyTorch", args.model)
    return tagger


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
