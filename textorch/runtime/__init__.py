"""Process-level knobs a caller opts into (allocator, garbage collector) and the choice of inference precision."""
