"""The simulated vLLM server with a DFlash-like speculative step model (depends on core only)."""
