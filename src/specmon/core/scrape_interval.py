"""The range of the /metrics scrape interval: `--interval` of watch and serve, and `[watch]
interval` of the config file."""

from __future__ import annotations

MIN_INTERVAL_S = 0.1
"""Shortest scrape interval accepted: faster scraping only loads the server (vLLM's own log
cadence is seconds)."""
MAX_INTERVAL_S = 3600.0
"""Longest scrape interval accepted (an hour): an unbounded one (inf, 1e308) overflowed the
wait."""
