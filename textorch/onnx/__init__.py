"""ONNX export of taggers and the ONNX Runtime engine (see docs/onnx.md)."""
