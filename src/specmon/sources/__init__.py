"""I/O that produces events: the OpenAI stream client, the /metrics scraper, the GPU sampler, the
vLLM host (subprocess) and the recording player."""
