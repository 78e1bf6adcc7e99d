"""Files and folders that follow the umask, as ``open`` and ``mkdir`` make them.

Atomic writes create their staging place with ``tempfile.mkdtemp`` (mode 0700) and some writers
make their file with ``mkstemp`` (0600: safetensors' ``save_file``), whatever the umask. A model
directory saved that way could not be read by another account (a service that loads models a
training account wrote), though every other file in it is readable. :func:`follow_umask` gives
such files and folders the mode the umask gives (0666 or 0777 less the umask) before they are
renamed into place.

Reading the umask: from ``/proc/self/status`` where the kernel says it (Linux 4.7 and later), which
changes nothing; elsewhere ``os.umask`` is set and set back at once, to 0o077 in between, so
that a file another thread creates in that instant is made more private, never less.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

_swap = threading.Lock()


def current_umask() -> int:
    """The process's umask, left as it is."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _swap:
        mask = os.umask(0o077)
        os.umask(mask)
    return mask


def follow_umask(root: str | Path) -> None:
    """``root`` and everything under it (symbolic links aside) get the mode that ``mkdir`` and
    ``open`` give under the current umask: 0777 or 0666 less the umask."""
    root = Path(root)
    mask = current_umask()
    for path in [root, *root.rglob("*")] if root.is_dir() else [root]:
        if path.is_symlink():
            continue
        os.chmod(path, (0o777 if path.is_dir() else 0o666) & ~mask)
