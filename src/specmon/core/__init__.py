"""Pure logic: event types, counters and rates, spec-decode maths, stream statistics, detectors,
session state. No I/O, no asyncio, no textual; time comes from an injectable clock."""
