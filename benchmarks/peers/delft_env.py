"""Create (once) and check the separate virtual environment that runs the peer, DeLFT 1.2.0.

DeLFT is not a dependency of textorch: it lives in its own venv outside the package, under
``$TEXTORCH_BENCH_DIR/delft-venv`` (default ``benchmarks/work/delft-venv``, git-ignored), and
is reused between runs while its stamp file matches the pins below.

Why the install is done by hand: ``pip install delft==1.2.0`` resolves ``torch==2.11.0`` and
pulls a multi-GB CUDA build. The fair set-up is the same CPU ``torch==2.13.0`` wheel textorch
uses, then DeLFT with ``--no-deps``, then DeLFT's other requirements, each pinned as DeLFT
pins them, installed together with the pinned torch so that pip never re-resolves it.

The registry DeLFT reads (``delft/resources-registry.json`` inside the installed package) is
rewritten in the venv copy: it gains the benchmark word vectors from ``../shared/embeddings``
and keeps its LMDB cache under the bench directory, never in ``../shared``.

Usage:
    python -m benchmarks delft_env            # create or reuse, then check; prints the venv python
    python -m benchmarks delft_env --force    # rebuild from scratch
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TORCH_PIN = "torch==2.13.0"
DELFT_PIN = "delft==1.2.0"
# DeLFT 1.2.0's Requires-Dist, minus torch (replaced by TORCH_PIN). Nothing here pulls a torch.
DELFT_REQUIREMENTS = [
    "numpy==2.2.6",
    "regex",
    "scikit-learn==1.7.2",
    "tqdm>=4.66",
    "unidecode==1.4.0",
    "lmdb==2.3.0",
    "truecase",  # imported at the top of delft/utilities/Utilities.py, so needed even for tagging
    "requests>=2.20",
    "pandas==2.3.3",
    "transformers==5.18.0",
    "safetensors>=0.4.3",
    "huggingface_hub>=1.5.0",
    "pytorch-crf>=0.7.2",
    "python-dotenv",
]
STAMP_NAME = ".bench-installed"
EMBEDDINGS_NAME = "w2v-conll-grobid-100d"


def bench_dir() -> Path:
    """Where the venv, converted data, caches and models of the benchmark live."""
    return Path(os.environ.get("TEXTORCH_BENCH_DIR", REPO / "benchmarks" / "work")).resolve()


def shared_embeddings() -> Path:
    base = Path(os.environ.get("TEXTORCH_SHARED_EMBEDDINGS", REPO.parent / "shared" / "embeddings"))
    return (base / f"{EMBEDDINGS_NAME}.txt").resolve()


def venv_dir() -> Path:
    return bench_dir() / "delft-venv"


def venv_python() -> Path:
    return venv_dir() / "bin" / "python"


def _spec() -> str:
    return "\n".join([sys.version.split()[0], TORCH_PIN, DELFT_PIN, *DELFT_REQUIREMENTS])


def _run(cmd: list[str]) -> None:
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True)


def _install(force: bool) -> None:
    venv = venv_dir()
    stamp = venv / STAMP_NAME
    if not force and stamp.exists() and stamp.read_text() == _spec() and venv_python().exists():
        return
    if venv.exists():
        shutil.rmtree(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    # The base interpreter, not a venv's: a venv made from a venv python still works, but this
    # keeps the peer's environment independent of textorch's.
    base = getattr(sys, "_base_executable", sys.executable)
    _run([base, "-m", "venv", str(venv)])
    pip = [str(venv_python()), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    _run([*pip, TORCH_PIN])
    _run([*pip, "--no-deps", DELFT_PIN])
    _run([*pip, "--no-warn-conflicts", TORCH_PIN, *DELFT_REQUIREMENTS])
    stamp.write_text(_spec())


def registry_path() -> Path:
    found = sorted(venv_dir().glob("lib/python*/site-packages/delft/resources-registry.json"))
    if not found:
        raise SystemExit(f"delft/resources-registry.json not found in {venv_dir()}: rerun with --force")
    return found[0]


def configure_registry() -> Path:
    """Point DeLFT's registry (venv copy) at the shared vectors and a cache under the bench dir."""
    vectors = shared_embeddings()
    if not vectors.exists():
        raise SystemExit(f"{vectors} not found: pass its folder with TEXTORCH_SHARED_EMBEDDINGS")
    path = registry_path()
    registry = json.loads(path.read_text(encoding="utf-8"))
    registry["embedding-lmdb-path"] = str(bench_dir() / "delft-cache" / "db")
    registry["embedding-download-path"] = str(bench_dir() / "delft-cache" / "download")
    entry = {"name": EMBEDDINGS_NAME, "path": str(vectors), "type": "glove", "format": "vec", "lang": "en", "item": "word"}
    registry["embeddings"] = [e for e in registry["embeddings"] if e.get("name") != EMBEDDINGS_NAME] + [entry]
    path.write_text(json.dumps(registry, indent=4) + "\n", encoding="utf-8")
    return path


def check() -> dict:
    """Import DeLFT and start both of its sequence-labelling CLIs; return versions."""
    python = str(venv_python())
    for app in ("nerTagger", "grobidTagger"):
        done = subprocess.run([python, "-m", f"delft.applications.{app}", "--help"], capture_output=True, text=True)
        if done.returncode != 0 or "usage" not in done.stdout:
            raise SystemExit(f"DeLFT's {app} CLI does not start:\n{done.stderr[-2000:]}")
    code = (
        "import json, importlib.metadata as m, torch; "
        "print(json.dumps({k: m.version(k) for k in ('delft', 'torch', 'transformers', 'numpy')}"
        " | {'cuda': torch.cuda.is_available()}))"
    )
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    versions = json.loads(done.stdout.strip().splitlines()[-1])
    if not versions["torch"].startswith("2.13.0"):
        raise SystemExit(f"the DeLFT venv has torch {versions['torch']}, expected {TORCH_PIN}: rerun with --force")
    return versions


def ensure(force: bool = False) -> tuple[Path, dict]:
    """Create or reuse the venv, configure the registry, check the CLIs; its python and versions."""
    _install(force)
    configure_registry()
    return venv_python(), check()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--force", action="store_true", help="delete and rebuild the venv")
    args = parser.parse_args()
    _install(args.force)
    registry = configure_registry()
    versions = check()
    print(json.dumps({"python": str(venv_python()), "registry": str(registry), **versions}))


if __name__ == "__main__":
    main()
