"""Models trained by DeLFT, read into textorch model directories (``textorch import-delft``).

Both lines are read: the PyTorch 1.x line (``model.safetensors`` or a ``model_weights`` state
dict) and the TensorFlow line GROBID ships (``model_weights.hdf5``). Kept apart from the
bridge package (:mod:`textorch.tagging.delft`) because ``SequenceLabeler.load`` converts a
DeLFT directory it is given, while the bridge's facade is built on ``SequenceLabeler``: one
package for both would make the two import each other.
"""
