"""Benchmarks and sweeps of num_speculative_tokens (uses sources and core, never ui)."""
