"""``textorch grobid-bridge DIR``: the directory GROBID's grobid.yaml names as ``delft.install``.

GROBID puts that directory on the interpreter's path, changes into it and imports
``delft.utilities.Embeddings``, ``delft.sequenceLabelling`` (``Sequence``) and
``delft.sequenceLabelling.reader``; for training it runs ``delft/applications/grobidTagger.py``
(older releases: ``grobidTagger.py`` at the root). The files written here are those, and each
only imports from :mod:`textorch.tagging.delft`, so the code stays in the installed textorch and
a textorch upgrade needs no new bridge. A ``delft/resources-registry.json`` placed beside them by
the user is read for embedding names and never overwritten.
"""

from __future__ import annotations

from pathlib import Path

from textorch.embeddings.delft_registry import BRIDGE_MARKER as MARKER
from textorch.errors import ConfigError
from textorch.runtime.write_errors import cannot_write

_SCRIPT = '''{marker}: DeLFT's grobidTagger.py command line, run by textorch.
import sys
from pathlib import Path

from textorch.cli.main import main
from textorch.errors import TextorchError
from textorch.tagging.delft.grobid_tagger import textorch_arguments

if __name__ == "__main__":
    bridge = Path(__file__).resolve(){parents}
    sys.path.insert(0, str(bridge))
    import delft  # noqa: F401  this bridge's package: its resources-registry.json names the embeddings
    try:
        arguments = textorch_arguments(sys.argv[1:], bridge)
    except TextorchError as exc:
        print(f"grobidTagger.py: error: {exc}", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(arguments))
'''

_PACKAGE = '''{marker}: a forwarding package; the code is textorch.tagging.delft.
"""DeLFT's names for GROBID, answered by textorch (see docs/grobid.md)."""
try:
    import textorch  # noqa: F401
except ImportError as exc:  # GROBID's interpreter (JEP) runs no .pth hook: an editable install is not seen
    raise ImportError(f"this Python cannot import textorch ({exc}); inside GROBID an editable install "
                      "(pip install -e) is invisible: install textorch with a regular pip install, or put it on "
                      "PYTHONPATH (see textorch's docs/grobid.md)") from None
'''

FILES = {
    "delft/__init__.py": _PACKAGE,
    "delft/utilities/__init__.py": "{marker}\n",
    "delft/utilities/Embeddings.py": "{marker}\nfrom textorch.tagging.delft.embeddings import Embeddings  # noqa: F401\n",
    "delft/sequenceLabelling/__init__.py": "{marker}\nfrom textorch.tagging.delft.facade import Sequence  # noqa: F401\n",
    "delft/sequenceLabelling/wrapper.py": "{marker}\nfrom textorch.tagging.delft.facade import Sequence  # noqa: F401\n",
    "delft/sequenceLabelling/reader.py": (
        "{marker}\nfrom textorch.tagging.delft.reader import (  # noqa: F401\n"
        "    load_data_and_labels_crf_file,\n    load_data_and_labels_crf_string,\n    load_data_crf_string,\n)\n"),
    "delft/applications/__init__.py": "{marker}\n",
    "delft/applications/grobidTagger.py": _SCRIPT.replace("{parents}", ".parents[2]"),
    "grobidTagger.py": _SCRIPT.replace("{parents}", ".parent"),
}
"""Path inside the bridge directory -> content (``{marker}`` is replaced by :data:`MARKER`)."""


def write_bridge(directory: str | Path) -> list[Path]:
    """Write (or refresh) the bridge files in ``directory``; returns the paths written.

    A file of the same name that this command did not write (a real DeLFT checkout, say) is
    left alone and the whole command refused, before anything is written.
    """
    root = Path(directory)
    if root.exists() and not root.is_dir():
        raise ConfigError(f"{root}: exists and is not a directory")
    foreign = [root / name for name in FILES if (root / name).exists() and not _ours(root / name)]
    if foreign:
        raise ConfigError(f"{foreign[0]}: exists and was not written by 'textorch grobid-bridge' (a DeLFT "
                          "installation?); choose another directory for the bridge")
    written = []
    for name, content in FILES.items():
        path = root / name
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content.replace("{marker}", MARKER), encoding="utf-8")
        except OSError as exc:  # a read-only or full place: one line naming the file, no traceback
            raise ConfigError(cannot_write(path, exc, "cannot write the bridge")) from None
        written.append(path)
    return written


def _ours(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8") as handle:
            return handle.readline().startswith(MARKER)
    except (OSError, UnicodeDecodeError):
        return False
