"""The /metrics page parser: filtered parse == full parse restricted to the read families, names,
aliases, labels, and clear errors on bad pages."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.support.metrics_page_fixtures import vllm_page

from specmon.core import families
from specmon.core.events import MetricSample
from specmon.core.metrics_page import (
    MetricsUnreadable,
    filter_lines,
    parse_metrics_page,
    parse_metrics_page_full,
)

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
GOLDEN_PAGES = sorted((GOLDEN / "metrics").glob("*.txt"))

model_names = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=20
)


@given(
    seed=st.integers(0, 2**32),
    engines=st.sampled_from([("0",), ("0", "1"), ("0", "1", "2", "3")]),
    n_spec=st.one_of(st.none(), st.integers(1, 16)),
    names=st.sampled_from(["current", "both", "old"]),
    model=model_names,
    noise=st.booleans(),
)
@pytest.mark.slow
def test_filtered_parse_equals_full_parse_on_generated_pages(
    seed, engines, n_spec, names, model, noise
):
    page = vllm_page(
        seed=seed, engines=engines, n_spec=n_spec, names=names, model=model, noise=noise
    )
    filtered = parse_metrics_page(page)
    assert filtered == parse_metrics_page_full(page)
    # Non-trivial: every read counter of every engine is there, with the model label intact.
    gen = [s for s in filtered if s.name == families.GENERATION_TOKENS]
    assert sorted(dict(s.labels)["engine"] for s in gen) == sorted(engines)
    assert all(dict(s.labels)["model_name"] == model for s in gen)


@pytest.mark.parametrize("path", GOLDEN_PAGES, ids=lambda p: p.name)
def test_filtered_parse_equals_full_parse_on_golden_pages(path):
    page = path.read_text(encoding="utf-8")
    samples = parse_metrics_page(page)
    assert samples == parse_metrics_page_full(page)
    assert any(s.name == families.GENERATION_TOKENS for s in samples)


def test_golden_pages_are_there():
    assert len(GOLDEN_PAGES) >= 8  # the real-vLLM captures (tests/golden/README.md)


def test_only_exact_read_names_and_no_created_samples():
    samples = parse_metrics_page(vllm_page(n_spec=4))
    names = {s.name for s in samples}
    assert names <= families.CURRENT_SAMPLE_NAMES
    assert not any(n.endswith("_created") for n in names)
    assert "vllm:iteration_tokens_total_bucket" not in names
    assert "vllm:prompt_tokens_cached_total" not in names
    assert families.SPEC_DRAFTS in names
    positions = {
        dict(s.labels)["position"] for s in samples if s.name == families.SPEC_ACCEPTED_PER_POS
    }
    assert positions == {"0", "1", "2", "3"}


def test_labels_are_sorted_tuples_and_values_floats():
    samples = parse_metrics_page(vllm_page(engines=("0", "1")))
    for s in samples:
        assert list(s.labels) == sorted(s.labels)
        assert isinstance(s.value, float)


def test_old_names_are_read_as_current_names():
    old = parse_metrics_page(vllm_page(seed=3, names="old"))
    names = {s.name for s in old}
    assert families.KV_CACHE_USAGE in names
    assert families.PREFIX_CACHE_HITS in names
    assert families.ITL + "_count" in names
    assert not any(n in families.ALIASES for n in names)


def test_both_names_present_reads_the_current_one_only():
    page = vllm_page(seed=5, names="both")
    kv = [s for s in parse_metrics_page(page) if s.name == families.KV_CACHE_USAGE]
    assert len(kv) == 1  # the old gauge did not become a second series


def test_no_spec_families_when_not_configured():
    samples = parse_metrics_page(vllm_page(n_spec=None))
    assert not any(s.name.startswith(families.SPEC_PREFIX) for s in samples)
    assert any(s.name == families.GENERATION_TOKENS for s in samples)


def test_filter_keeps_help_and_type_lines_of_read_families_only():
    text = filter_lines(vllm_page(noise=True))
    for line in text.splitlines():
        if line.startswith("#"):
            assert line.split()[2] in families.FAMILY_NAMES
        else:
            assert line.startswith("vllm:")
    assert "process_" not in text and "http_requests" not in text


def test_v0_acceptance_gauge_is_read():
    page = (
        "# HELP vllm:spec_decode_draft_acceptance_rate Speculative token acceptance rate.\n"
        "# TYPE vllm:spec_decode_draft_acceptance_rate gauge\n"
        'vllm:spec_decode_draft_acceptance_rate{model_name="m"} 0.42\n'
    )
    assert parse_metrics_page(page) == (
        MetricSample(families.V0_DRAFT_ACCEPTANCE_RATE, (("model_name", "m"),), 0.42),
    )


def test_non_finite_values_are_dropped():
    page = 'vllm:num_requests_running{engine="0"} NaN\nvllm:num_requests_waiting{engine="0"} 2\n'
    assert parse_metrics_page(page) == (
        MetricSample(families.REQUESTS_WAITING, (("engine", "0"),), 2.0),
    )


def test_page_without_read_families_is_empty_not_an_error():
    page = "# HELP up Up.\n# TYPE up gauge\nup 1.0\n"
    assert parse_metrics_page(page) == ()


@pytest.mark.parametrize(
    ("page", "words"),
    [
        ("", "empty"),
        ("<html><body>502 Bad Gateway</body></html>\n", "not valid Prometheus text"),
        ('vllm:generation_tokens_total{engine="0" 12\n', "not valid Prometheus text"),
        ("vllm:generation_tokens_total 12 abc\n", "not valid Prometheus text"),
        ('vllm:num_requests_running{engine="0"} 1\nvllm:generation_tokens_total{eng', "truncated"),
    ],
)
def test_bad_pages_raise_a_clear_message(page, words):
    with pytest.raises(MetricsUnreadable) as info:
        parse_metrics_page(page)
    assert str(info.value).startswith("metrics unreadable: ")
    assert words in str(info.value)


def test_a_truncated_real_page_is_unreadable():
    page = vllm_page(seed=1)
    with pytest.raises(MetricsUnreadable, match="truncated"):
        parse_metrics_page(page[: len(page) // 2])


def test_size_cap():
    page = vllm_page(seed=2)
    assert parse_metrics_page(page, max_chars=len(page))
    with pytest.raises(MetricsUnreadable, match="over the cap"):
        parse_metrics_page(page, max_chars=len(page) - 1)


def test_a_series_listed_twice_makes_the_page_unreadable_whatever_the_label_order():
    page = (
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{engine="0",model_name="m"} 1.0\n'
        'vllm:num_requests_running{engine="1",model_name="m"} 2.0\n'
        'vllm:num_requests_running{model_name="m",engine="0"} 1.0\n'
    )
    with pytest.raises(MetricsUnreadable) as info:
        parse_metrics_page(page)
    assert str(info.value).startswith(
        'metrics unreadable: duplicate series: vllm:num_requests_running{engine="0",model_name="m"}'
    )
    with pytest.raises(MetricsUnreadable):
        parse_metrics_page_full(page)
    # two engines are two series, not a duplicate
    assert len(parse_metrics_page(page.rsplit("vllm:", 1)[0])) == 2
