"""Decoding NVML / DCGM clock-event reason bitmasks to words."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specmon.core.gpu_reasons import (
    SLOWDOWN_REASONS,
    decode_clock_event_reasons,
    mask_from_float,
)

# The bit values as NVML's header documents them (nvmlClocksEventReason*), written out here
# independently of the module under test.
DOCUMENTED = [
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
    (0x200, "board_limit"),
    (0x400, "reliability"),
]


@pytest.mark.parametrize(("bit", "word"), DOCUMENTED)
def test_each_documented_bit_decodes_to_its_word(bit, word):
    assert decode_clock_event_reasons(bit) == (word,)


def test_no_bit_set_is_an_empty_tuple_not_none():
    assert decode_clock_event_reasons(0) == ()


def test_several_bits_decode_in_bit_order():
    # sw_power_cap (0x4) + sw_thermal (0x20) + hw_thermal (0x40): a hot, power-capped GPU
    assert decode_clock_event_reasons(0x64) == (
        "sw_power_cap",
        "sw_thermal_slowdown",
        "hw_thermal_slowdown",
    )


def test_unknown_bits_are_kept_as_unknown_words():
    assert decode_clock_event_reasons(0x4 | 0x800 | 0x10000) == (
        "sw_power_cap",
        "unknown_0x800",
        "unknown_0x10000",
    )


def test_negative_mask_is_refused():
    with pytest.raises(ValueError, match="negative"):
        decode_clock_event_reasons(-1)


@given(st.sets(st.sampled_from(DOCUMENTED)))
def test_decoding_an_or_of_bits_gives_exactly_their_words(chosen):
    mask = 0
    for bit, _ in chosen:
        mask |= bit
    assert set(decode_clock_event_reasons(mask)) == {word for _, word in chosen}


@given(st.integers(min_value=0, max_value=2**64 - 1))
def test_every_set_bit_yields_exactly_one_word(mask):
    assert len(decode_clock_event_reasons(mask)) == mask.bit_count()


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0.0, 0), (4.0, 4), (100.0, 100), (-1.0, None), (1.5, None), (float("nan"), None)],
)
def test_mask_from_a_prometheus_float(value, expected):
    assert mask_from_float(value) == expected


def test_mask_from_infinity_is_none():
    assert mask_from_float(float("inf")) is None


def test_the_costly_reasons_are_decoded_words_and_leave_out_idle_and_boost():
    # The vanilla-speed detector keeps the decoded words found in SLOWDOWN_REASONS: a word no bit
    # decodes to would never match, and idle, sync boost or app clocks are no slowdown.
    words = {word for _, word in DOCUMENTED}
    assert SLOWDOWN_REASONS.issubset(words)
    assert {"sw_thermal_slowdown", "hw_thermal_slowdown", "sw_power_cap"} <= SLOWDOWN_REASONS
    assert not SLOWDOWN_REASONS & {"gpu_idle", "applications_clocks_setting", "sync_boost"}
