"""DeLFT's registry of embedding names, as a bridge written by ``textorch grobid-bridge`` holds it.

A GROBID user switching from DeLFT keeps their ``delft/resources-registry.json``
(``{"embeddings": [{"name": "glove-840B", "path": "/data/glove.840B.300d.txt", ...}]}``) by copying
it into the bridge's ``delft/`` folder. Inside GROBID (JEP, or the training subprocess) the
process imports that bridge, so every name is looked up there first; see
:func:`textorch.embeddings.registry.resolve_spec`, the one rule for every path that names vectors.

Only a ``delft`` package written by the bridge command counts: a real DeLFT imported beside
textorch keeps its registry to itself.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from textorch.errors import ConfigError

REGISTRY_FILE = "resources-registry.json"
BRIDGE_MARKER = "# written by 'textorch grobid-bridge'"
"""First line of every file the bridge command writes (so that a rerun replaces them and nothing else)."""


def bridge_package() -> Path | None:
    """The ``delft/`` folder of the textorch bridge this process imported, if it did."""
    location = getattr(sys.modules.get("delft"), "__file__", None)
    if not location:
        return None
    try:
        with open(location, encoding="utf-8") as handle:
            first = handle.readline()
    except (OSError, UnicodeDecodeError):
        return None
    return Path(location).parent if first.startswith(BRIDGE_MARKER) else None


def bridge_registry() -> Path | None:
    """Where the bridge in use reads DeLFT's registry (the file may not exist); None outside a bridge."""
    package = bridge_package()
    return package / REGISTRY_FILE if package is not None else None


def delft_registry_path(name: str, registry: Path) -> Path | None:
    """The vectors file ``registry`` gives for ``name``; None when the registry is absent or does not list it.

    A relative path is taken from the folder holding ``delft/``, DeLFT's working directory (GROBID
    changes into it), whatever the current directory. A listed file that does not exist is an error.
    """
    if not registry.is_file():
        return None
    try:
        entries = json.loads(registry.read_text(encoding="utf-8")).get("embeddings") or []
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError) as exc:
        raise ConfigError(f"cannot read the DeLFT registry {registry}: {exc}") from None
    for entry in entries:
        if isinstance(entry, dict) and entry.get("name") == name:
            file = entry.get("path")
            found = Path(file).expanduser() if isinstance(file, str) and file else None
            if found is not None and not found.is_absolute():
                base = registry.parent.parent if registry.parent.name == "delft" else registry.parent
                found = base / found
            if found is None or not found.is_file():
                raise ConfigError(f"embeddings {name!r} of the DeLFT registry {registry}: file "
                                  f"{str(found) if found is not None else file!r} not found "
                                  "(textorch reads local vector files only)")
            return found
    return None


def registry_entry(name: str) -> str:
    """The JSON entry that registers ``name``, as a message shows it."""
    return json.dumps({"name": name, "path": "/path/to/vectors.txt"})
