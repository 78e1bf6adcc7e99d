"""Training progress that shows wherever the facade runs, an interpreter embedded in GROBID included.

textorch reports epochs through :mod:`logging` and leaves its set-up to the application (the
``textorch`` command does it). Inside GROBID (JEP) no one sets it up, and Python then drops
anything below a warning: ``trainJNI`` would train in silence. So, while the facade trains and
only when nothing would show textorch's records, a handler on textorch's own logger writes them
to standard error (which JEP hands to Java); it is removed afterwards, and nothing else changes.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

PACKAGE_LOGGER = "textorch"


@contextmanager
def training_progress() -> Iterator[None]:
    """Show textorch's progress records during the block, unless logging already shows them."""
    package = logging.getLogger(PACKAGE_LOGGER)
    if package.hasHandlers():  # logging is set up (its level included): left as it is
        yield
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S"))
    level = package.level
    package.addHandler(handler)
    if package.getEffectiveLevel() > logging.INFO:
        package.setLevel(logging.INFO)
    try:
        yield
    finally:
        package.removeHandler(handler)
        package.setLevel(level)
