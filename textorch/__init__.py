"""textorch: deep learning on text with PyTorch."""

__version__ = "0.1.0"
