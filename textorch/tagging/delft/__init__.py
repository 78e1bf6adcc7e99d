"""DeLFT compatibility: what GROBID calls by DeLFT's names, answered by textorch.

GROBID runs DeLFT in-process through JEP (``Sequence``, ``load_data_crf_string``) and as a
training subprocess (``delft/applications/grobidTagger.py``). ``textorch grobid-bridge DIR``
writes a ``delft`` package into DIR whose modules only forward here, so that naming DIR as
``delft.install`` in grobid.yaml makes GROBID use textorch; nothing named ``delft`` is importable
outside that directory. See docs/grobid.md.

Models trained by DeLFT (the PyTorch 1.x line and the TensorFlow line GROBID ships) are
converted into textorch model directories by :mod:`textorch.tagging.delft_import` (``textorch import-delft``).
"""
