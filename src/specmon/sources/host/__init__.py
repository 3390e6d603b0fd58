"""Host mode: start and keep a `vllm serve` (DFlash, EAGLE-3, MTP, ngram, draft model) from specmon.

- `spec`: settings, method rules, the speculative config and the exact command line.
- `presets`: the seeds' working configurations and the user's own (config.toml).
- `checks`: before launch — vLLM present, its python and version, port free, GPU memory, and
  the arguments through vLLM's own parser.
- `process`: the process group, log pump, readiness (/health 200), failure report, stop and the
  watchdog that stops the group when specmon dies.

Startup-progress parsing and failure recognition are pure and live in core.startup_log.
"""

from __future__ import annotations
