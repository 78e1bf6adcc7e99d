"""The format-1 model fixture kept as text, and rebuilt into a model directory by the tests.

``tests/fixtures/model-v1-bilstm-crf`` holds the ``config.json`` and ``vocab.json`` that
textorch 0.1.0 wrote, and ``weights.json``: every tensor of that release's ``model.safetensors``
(name, dtype, shape, values), so that no weights binary is tracked in git. Each value is a
float32 written with the shortest decimal that reads back to the same float, and safetensors
serialises a given set of tensors identically, so :func:`v1_model_dir` recreates the
original file byte for byte; the SHA-256 recorded by 0.1.0 in ``config.json`` checks that.

    python tests/model_fixture.py dump DIR/model.safetensors OUT/weights.json   # binary -> text
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

import numpy as np

SOURCE = Path(__file__).resolve().parent / "fixtures" / "model-v1-bilstm-crf"
TEXT_WEIGHTS = "weights.json"


def dump_weights(safetensors_path: Path, json_path: Path) -> None:
    """Write the tensors of a safetensors file as JSON text, in the file's own order."""
    from safetensors.numpy import load_file

    tensors = load_file(str(safetensors_path))
    payload = {name: {"dtype": str(array.dtype), "shape": list(array.shape),
                      "values": [float(v) for v in array.reshape(-1)]} for name, array in tensors.items()}
    json_path.write_text(json.dumps(payload) + "\n", encoding="utf-8")


def v1_model_dir(target: Path) -> Path:
    """A loadable copy of the 0.1.0 model directory at ``target``, its weights file rebuilt."""
    from safetensors.numpy import save_file

    target.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "vocab.json"):
        shutil.copyfile(SOURCE / name, target / name)
    payload = json.loads((SOURCE / TEXT_WEIGHTS).read_text(encoding="utf-8"))
    tensors = {name: np.asarray(t["values"], dtype=t["dtype"]).reshape(t["shape"]) for name, t in payload.items()}
    save_file(tensors, str(target / "model.safetensors"))
    recorded = json.loads((target / "config.json").read_text(encoding="utf-8"))["weights_sha256"]
    rebuilt = hashlib.sha256((target / "model.safetensors").read_bytes()).hexdigest()
    if rebuilt != recorded:
        raise AssertionError(f"{SOURCE / TEXT_WEIGHTS}: rebuilt weights differ from the 0.1.0 file (sha256 {rebuilt})")
    return target


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "dump":
        raise SystemExit(__doc__)
    dump_weights(Path(sys.argv[2]), Path(sys.argv[3]))
