"""``textorch export onnx --model DIR``: the ONNX graph and plain-JSON decoding data of a tagger."""

from __future__ import annotations

import argparse
from pathlib import Path


def _export_onnx(args: argparse.Namespace) -> int:
    from textorch.labeler import SequenceLabeler
    from textorch.onnx.engine import default_export_dir
    from textorch.onnx.export import export_labeler

    labeler = SequenceLabeler.load(args.model, cache_dir=args.cache_dir)
    output = Path(args.output) if args.output else default_export_dir(args.model)
    export_labeler(labeler, output, quantize=args.quantize)
    print(output)
    return 0


def add_engine_options(parser: argparse.ArgumentParser) -> None:
    """``--engine``/``--onnx-dir``/``--quantized`` for commands that run a saved tagger."""
    group = parser.add_argument_group("inference engine")
    group.add_argument("--engine", default="torch", choices=["torch", "onnx"],
                       help="run the network with PyTorch or ONNX Runtime (CPU; exports into DIR/onnx when absent) (default: torch)")
    group.add_argument("--onnx-dir", default=None, metavar="DIR",
                       help="ONNX export to use with --engine onnx (default: MODEL/onnx)")
    group.add_argument("--quantized", action="store_true",
                       help="with --engine onnx: use the int8 model of an export made with --quantize")


def apply_engine_options(args: argparse.Namespace, labeler) -> None:
    """Switch a loaded labeler to ONNX Runtime when the options ask for it."""
    if getattr(args, "engine", "torch") != "onnx":
        return
    from textorch.errors import ConfigError
    from textorch.onnx.engine import attach_onnx

    if labeler.device.type != "cpu":
        raise ConfigError("--engine onnx runs on the CPU; use --device cpu")
    attach_onnx(labeler, args.model, args.onnx_dir, quantized=args.quantized, threads=args.threads)


def register(groups: argparse._SubParsersAction) -> None:
    export = groups.add_parser("export", help="export a saved model for other runtimes")
    commands = export.add_subparsers(dest="command", metavar="FORMAT", required=True)
    p = commands.add_parser("onnx", help="ONNX graph up to the emissions, plus labels/vocab/CRF as JSON (see docs/onnx.md)")
    p.add_argument("--model", required=True, help="model directory (a recurrent tagger: BidLSTM*, BidGRU*)")
    p.add_argument("--output", default=None, help="export directory, replaced atomically (default: MODEL/onnx)")
    p.add_argument("--quantize", action="store_true", help="also write model.int8.onnx (dynamic int8 quantisation)")
    p.add_argument("--cache-dir", default=None, help="embeddings cache directory (default: $TEXTORCH_CACHE_DIR or ~/.cache/textorch)")
    p.set_defaults(run=_export_onnx)
