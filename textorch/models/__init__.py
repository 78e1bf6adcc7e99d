"""Networks and their parts.

Old module paths of this package (``textorch.models.packed_lstm``) resolve through one file each
in ``textorch/legacy_paths/models/``, searched after this folder.
"""

import os as _os

__path__.append(_os.path.join(_os.path.dirname(_os.path.dirname(__file__)), "legacy_paths", "models"))
