"""One part of textorch measured alone: training, classification, transformers, ONNX, the server, streaming, GPUs."""
