"""The process-level knob a caller opts into (the allocator) and the choice of inference precision."""
