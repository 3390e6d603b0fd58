"""Parse a vLLM `/metrics` text page, keeping only the families specmon reads.

A page has ~650 lines; specmon reads a few dozen families. A cheap line filter keeps the lines of
those families (samples and their `# HELP` / `# TYPE` lines) and prometheus_client's own text parser
reads only those, so the result equals a full parse restricted to the same families (tested) at a
fraction of the cost (benchmarks/metrics_parse.py).

Rules:
- exact exported sample names (`..._total`, histograms' `_sum`/`_count`); `*_created` and
  histogram `_bucket` lines are not read (families.HISTOGRAM_READ_SUFFIXES), except those of
  TTFT and ITL (families.QUANTILE_HISTOGRAMS: their percentiles);
- older names (families.ALIASES) are renamed to the current ones, but only when the page has no
  sample of the current name (vLLM 0.9.2-0.11 export both);
- labels become sorted tuples (events.labels_of); engines stay separate series;
- non-finite values (NaN, ±Inf) are dropped: they are not readings;
- a series (name and labels, in any label order) on the page twice makes the page unreadable,
  whatever the two values: which one is the counter cannot be known, and reading both would turn
  an unchanging page into counter resets, rates and acceptance that did not happen.

Bad pages raise `MetricsUnreadable` with a message starting "metrics unreadable: ": over the size
cap, empty, truncated (no final newline: prometheus_client always ends a page with one, and a cut
page could silently lose the spec-decode families, which would read as "not configured"), a line of
a read family that does not parse, a duplicated series of a read family, or a page with no read
family that is not Prometheus text at all.
A valid page with no read family (e.g. `--disable-log-stats`) gives an empty tuple.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from prometheus_client.parser import text_string_to_metric_families

from specmon.core import families
from specmon.core.events import Labels, MetricSample, labels_of

DEFAULT_MAX_CHARS = families.MAX_PAGE_BYTES
"""Size cap of a page (characters). A vLLM page is ~60 KB; 8 MiB leaves room for many engines."""


class MetricsUnreadable(ValueError):
    """A /metrics page that cannot be read with certainty; str() starts "metrics unreadable: "."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"metrics unreadable: {reason}")
        self.reason = reason


def _alternation(names: frozenset[str]) -> str:
    # Longest first, so a name is never cut short by one of its prefixes.
    return "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))


_KEEP_LINE = re.compile(
    rf"(?:{_alternation(families.READ_SAMPLE_NAMES)})[{{ \t]"
    rf"|# (?:HELP|TYPE) (?:{_alternation(families.FAMILY_NAMES)})(?:[ \t]|$)"
)
"""A line to keep starts with an exact read sample name followed by '{', a space or a tab, or is
the # HELP / # TYPE line of a read family. `match` anchors at the line start."""


def filter_lines(text: str) -> str:
    """The lines of `text` that belong to a read family (samples, `# HELP`, `# TYPE`), joined.

    One C-level pass (str.split, then the compiled pattern's match per line via `filter`): about
    twice as fast as a Python loop over the lines."""
    kept = list(filter(_KEEP_LINE.match, text.split("\n")))
    kept.append("")
    return "\n".join(kept)


def _check_page(text: str, max_chars: int) -> None:
    if len(text) > max_chars:
        raise MetricsUnreadable(f"page is {len(text)} characters, over the cap of {max_chars}")
    if not text.strip():
        raise MetricsUnreadable("page is empty")
    if not text.endswith("\n"):
        last = text.rsplit("\n", 1)[-1]
        raise MetricsUnreadable(f"page truncated (last line has no newline: {last[:80]!r})")


def _parse(text: str) -> list[MetricSample]:
    """Every sample of a Prometheus text page, via prometheus_client's parser."""
    out: list[MetricSample] = []
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                out.append(MetricSample(s.name, labels_of(s.labels), float(s.value)))
    except Exception as exc:  # the parser raises bare ValueError, IndexError, ...
        detail = str(exc) or type(exc).__name__
        raise MetricsUnreadable(f"not valid Prometheus text ({detail[:200]})") from exc
    return out


def normalise(samples: Iterable[MetricSample]) -> tuple[MetricSample, ...]:
    """Keep read families only, drop non-finite values, map aliases to current names."""
    current: list[MetricSample] = []
    aliased: list[MetricSample] = []
    present: set[str] = set()
    for s in samples:
        if not math.isfinite(s.value):
            continue
        if s.name in families.CURRENT_SAMPLE_NAMES:
            current.append(s)
            present.add(s.name)
        elif s.name in families.ALIASES:
            aliased.append(s)
    for s in aliased:
        new_name = families.ALIASES[s.name]
        if new_name not in present:
            current.append(MetricSample(new_name, s.labels, s.value))
    return tuple(current)


def refuse_duplicates(samples: tuple[MetricSample, ...]) -> tuple[MetricSample, ...]:
    """`samples`, unless a series (name and labels) is on the page more than once: then
    MetricsUnreadable naming it. Which of two values is the counter cannot be known, and reading
    both makes one look like a reset of the other (phantom resets, rates and acceptance)."""
    seen: set[tuple[str, Labels]] = set()
    duplicated: dict[tuple[str, Labels], int] = {}
    for s in samples:
        key = (s.name, s.labels)
        if key in seen:
            duplicated[key] = duplicated.get(key, 1) + 1
        seen.add(key)
    if not duplicated:
        return samples
    (name, labels), times = next(iter(duplicated.items()))
    series = name + "{" + ",".join(f'{k}="{v}"' for k, v in labels) + "}"
    more = f" (and {len(duplicated) - 1} more series)" if len(duplicated) > 1 else ""
    raise MetricsUnreadable(
        f"duplicate series: {series[:200]} is on the page {times} times{more}; "
        "a page lists each series once"
    )


def parse_metrics_page(
    text: str, *, max_chars: int = DEFAULT_MAX_CHARS
) -> tuple[MetricSample, ...]:
    """The samples of the read families on a /metrics page (filtered parse). See module doc."""
    _check_page(text, max_chars)
    filtered = filter_lines(text)
    if filtered.strip():
        return refuse_duplicates(normalise(_parse(filtered)))
    # No read family: say whether this is a Prometheus page at all (such pages are small).
    _parse(text)
    return ()


def parse_metrics_page_full(
    text: str, *, max_chars: int = DEFAULT_MAX_CHARS
) -> tuple[MetricSample, ...]:
    """The same result from a full parse of the whole page (the reference the filter is tested
    and benchmarked against; not used at run time)."""
    _check_page(text, max_chars)
    return refuse_duplicates(normalise(_parse(text)))
