"""The quality sentinel (core/diagnosis/quality.py): hand-computable cases."""

from __future__ import annotations

from pathlib import Path

import pytest

from specmon.core.diagnosis import quality
from specmon.core.diagnosis.quality import (
    LOOP_END_CHARS,
    LOOP_END_REPEATS,
    LOOP_TAIL_SHARE,
    MIN_SPREAD,
    ALStats,
    HealthyAL,
    check_answer,
    periodic_end,
    repeated_ngram_share,
    tail_repeat_share,
)

PROSE = " ".join(f"word{i}" for i in range(300))
LOOP = " ".join(["the cat sat on the mat"] * 60)
# A real answer that ends in a loop late (a real vLLM on a GPU, the trained DFlash pair's target
# served alone, held-out code, greedy, 192 tokens; docs/gpu.md, "Second run: two H200s"): vLLM's
# token ids repeat a period of 7 over the last 79 tokens, one line of 25 characters. Text as
# decoded from those ids; the answer was cut off mid-line.
LATE_LOOP_HEAD = (
    ":\n"
    "                    return item\n"
    "                if isinstance(item, int):\n"
    "                    return item.item()\n"
    "                return item\n"
    "            return item\n"
    "        return item\n"
    "\n"
    "    def __repr__(self) -> str:\n"
    '        return f"__iter__(self)={self.data}"\n'
    "\n"
    "\n"
    "class _Symbol:\n"
    '    """\n'
    "    A class to handles a new ``__iter__``.\n"
    "\n"
    "    This class is used to handle this class.\n"
    '    """\n'
    "\n"
)
LATE_LOOP_LINE = "        self.item = item\n"
LATE_LOOP = LATE_LOOP_HEAD + "    def __init__(self, item):\n" + LATE_LOOP_LINE * 11 + " " * 7
SOUP = " ".join(["##", "@!", "}{", "ok", "<>", "%%"] * 40)


def _stats(values: list[float]) -> ALStats:
    s = ALStats()
    for v in values:
        s.add(v)
    return s


def _healthy(values: list[float]) -> HealthyAL:
    h = HealthyAL()
    for v in values:
        h.add(v)
    return h


def test_repeated_share_is_one_minus_distinct_over_total() -> None:
    assert repeated_ngram_share(PROSE) == 0.0
    # 20 words "a b a b ...": 17 4-grams, 2 distinct.
    assert repeated_ngram_share("a b " * 10) == pytest.approx(1 - 2 / 17)
    assert repeated_ngram_share("too short") is None


def test_welford_matches_the_textbook_mean_and_sd() -> None:
    s = _stats([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0])
    assert s.mean == pytest.approx(5.0)
    assert s.std() == pytest.approx((32 / 7) ** 0.5)
    assert s.z(5.0 + 2 * (32 / 7) ** 0.5) == pytest.approx(2.0)
    assert _stats([3.0] * 3).z(9.0) is None  # too few answers


def test_a_high_al_answer_that_repeats_is_a_loop() -> None:
    stats = _healthy([3.0, 3.2, 2.8, 3.1, 2.9, 3.0, 3.2, 2.8])
    v = check_answer("r", 1.0, LOOP, 400, 8.5, stats, n_spec=8)
    assert v is not None and v.flag == "loop"
    assert v.repeated_ngram_share is not None and v.repeated_ngram_share > 0.9
    assert v.al_z is not None and v.al_z > 3
    assert "repeat" in v.evidence


def test_a_high_al_answer_of_varied_text_is_not_a_loop() -> None:
    stats = _healthy([3.0, 3.2, 2.8, 3.1, 2.9, 3.0, 3.2, 2.8])
    v = check_answer("r", 1.0, PROSE, 400, 8.5, stats, n_spec=8)
    assert v is not None and v.flag is None


def test_near_the_ceiling_a_loop_is_flagged_without_history() -> None:
    v = check_answer("r", 1.0, LOOP, 400, 8.5, HealthyAL(), n_spec=8)
    assert v is not None and v.flag == "loop" and v.al_z is None


def test_a_very_low_al_on_a_good_drafter_with_symbol_soup_is_garbled() -> None:
    stats = _healthy([5.0, 5.2, 4.8, 5.1, 4.9, 5.0, 5.2, 4.8])
    v = check_answer("r", 1.0, SOUP, 300, 1.1, stats, n_spec=8)
    assert v is not None and v.flag == "garbled" and "z -" in v.evidence
    assert "83% of its text is not words" in v.evidence  # 5 of every 6 pieces


def test_an_answer_that_fell_to_vanilla_speed_but_reads_normally_is_not_garbled() -> None:
    stats = _healthy([5.0, 5.2, 4.8, 5.1, 4.9, 5.0, 5.2, 4.8])
    v = check_answer("r", 1.0, PROSE, 300, 1.1, stats, n_spec=8)
    assert v is not None and v.flag is None and v.al_z is not None and v.al_z <= -3


def test_a_low_al_on_a_weak_drafter_is_not_garbled() -> None:
    stats = _healthy([1.5, 1.7, 1.3, 1.6, 1.4, 1.5, 1.7, 1.3])
    v = check_answer("r", 1.0, SOUP, 300, 1.0, stats, n_spec=8)
    assert v is not None and v.flag is None


def test_short_answers_and_answers_without_al_are_not_judged() -> None:
    stats = _healthy([3.0] * 10)
    assert check_answer("r", 1.0, LOOP, 50, 8.5, stats, n_spec=8) is None
    assert check_answer("r", 1.0, LOOP, 400, None, stats, n_spec=8) is None


def test_the_healthy_level_is_the_upper_half_of_the_recent_answers() -> None:
    # a degradation cycle: 6 healthy answers around 3.5, 4 degraded at AL 1.0
    h = _healthy([3.4, 3.6, 3.5, 3.3, 3.7, 1.0, 1.0, 1.0, 1.0, 3.5])
    found = h.level()
    assert found is not None
    level, spread = found
    assert level == pytest.approx(3.5)  # the median of the upper half: 3.4, 3.5, 3.5, 3.6, 3.7
    assert spread >= MIN_SPREAD
    assert _healthy([3.0] * 4).level() is None  # too few answers


def test_garbled_is_flagged_while_a_degradation_cycle_puts_many_answers_at_al_one() -> None:
    # The session's usual over every answer (mean 2.6, sd 1.2) puts AL 1.0 only 1.3 sd below:
    # the rule before flagged nothing. Against the healthy level (3.5) it is far below.
    cycle = [3.4, 3.6, 3.5, 3.3, 3.7, 1.9, 1.0, 1.0, 1.0, 3.5] * 2
    v = check_answer("r", 1.0, SOUP, 256, 1.0, _healthy(cycle), n_spec=8)
    assert v is not None and v.flag == "garbled"
    assert "healthy answers reach 3.50" in v.evidence
    # the cycle's own degraded answers read normally: not garbled
    v = check_answer("r", 1.0, PROSE, 256, 1.0, _healthy(cycle), n_spec=8)
    assert v is not None and v.flag is None


def test_a_text_that_is_nearly_all_repeats_is_a_loop_at_any_al() -> None:
    # A loop served while the drafter fails (a degraded phase): AL 1.0, but the text is one
    # phrase over and over. The text's own evidence flags it; a text that repeated a phrase in
    # part and went on to other words (it did not end in the loop) still needs a high AL.
    stats = _healthy([3.0, 3.2, 2.8, 3.1, 2.9, 3.0, 3.2, 2.8])
    v = check_answer("r", 1.0, LOOP, 400, 1.0, stats, n_spec=8)
    assert v is not None and v.flag == "loop"
    assert "text's own evidence" in v.evidence and "AL 1.00" in v.evidence
    half = " ".join(["the cat sat on the mat"] * 70) + " " + PROSE
    share = repeated_ngram_share(half)
    assert share is not None and 0.5 <= share < 0.9
    w = check_answer("r", 1.0, half, 400, 1.0, stats, n_spec=8)
    assert w is not None and w.flag is None


def test_a_loop_inside_one_word_is_a_loop_at_any_al() -> None:
    # Real loops from a small learned DFlash drafter on vLLM (recordings/gpu-h200-real-dflash-
    # trained-k7-prose-loops): `org/pull/cach/cach/cach/…` has no word n-grams at all, and the
    # drafter did not follow it (AL 1.42, the session's lowest). Its end repeats itself.
    stats = _healthy([2.6, 2.8, 2.4, 2.7, 2.5, 2.6, 2.8, 2.4])
    text = "org/pull/" + "cach/" * 62
    assert repeated_ngram_share(text) is None
    v = check_answer("r", 1.0, text, 192, 1.42, stats, n_spec=7)
    assert v is not None and v.flag == "loop"
    assert "characters repeat" in v.evidence and "AL 1.42" in v.evidence


def test_ordinary_code_at_a_low_al_is_not_a_loop() -> None:
    # Code repeats names and indentation, far less than a loop: this module's own source.
    stats = _healthy([2.6, 2.8, 2.4, 2.7, 2.5, 2.6, 2.8, 2.4])
    code = Path(quality.__file__).read_text(encoding="utf-8")
    for end in range(1024, len(code), 997):
        share = tail_repeat_share(code[:end])
        assert share is not None and share < LOOP_TAIL_SHARE
        v = check_answer("r", 1.0, code[:end], 300, 1.3, stats, n_spec=7)
        assert v is None or v.flag != "loop"


def test_the_periodic_end_is_the_longest_end_that_repeats_one_piece() -> None:
    assert periodic_end("intro: " + "abc" * 5 + "ab") == (3, 17)  # the last repeat cut off
    assert periodic_end("xyz" + "ab" * 8) == (2, 16)  # the shortest period, not 4 or 8
    assert periodic_end("abcdefg") is None
    assert periodic_end("") is None


def test_an_answer_that_ends_in_a_loop_late_is_a_loop_at_any_al() -> None:
    # The loop covers about 300 of the last 512 characters: too few of their 8-character pieces
    # repeat for the tail share, and too few word 4-grams for the text share. Its end repeats one
    # line exactly, 11 times over and a cut-off twelfth.
    stats = _healthy([2.6, 2.8, 2.4, 2.7, 2.5, 2.6, 2.8, 2.4])
    tail = tail_repeat_share(LATE_LOOP)
    assert tail is not None and tail < LOOP_TAIL_SHARE
    assert periodic_end(LATE_LOOP) == (25, 283)
    for al, history in ((1.0, HealthyAL()), (1.0, stats), (2.6, stats)):
        v = check_answer("r1", 1.0, LATE_LOOP, 192, al, history, n_spec=7)
        assert v is not None and v.flag == "loop", (al, v)
        assert "its last 283 characters repeat one 25-character piece 11 times" in v.evidence


def test_a_loop_at_the_end_is_a_loop_whatever_the_answer_s_length() -> None:
    # The same loop after a long ordinary answer: the rule reads the end, not a share of the text.
    stats = _healthy([2.6, 2.8, 2.4, 2.7, 2.5, 2.6, 2.8, 2.4])
    code = Path(quality.__file__).read_text(encoding="utf-8")[:6000]
    text = code + "\n    def __init__(self, item):\n" + LATE_LOOP_LINE * 11 + " " * 7
    v = check_answer("r", 1.0, text, 1500, 1.0, stats, n_spec=7)
    assert v is not None and v.flag == "loop"


def test_a_phrase_repeated_a_few_times_at_the_end_is_not_a_loop() -> None:
    # Twice (even a long piece over more than LOOP_END_CHARS characters), or a short line
    # repeated LOOP_END_REPEATS times over fewer than LOOP_END_CHARS characters, is ordinary.
    stats = _healthy([2.6, 2.8, 2.4, 2.7, 2.5, 2.6, 2.8, 2.4])
    phrase = (
        "    result = compute_the_next_value(previous_value, with_options=defaults)\n"
        "    log.info('the next value is %s', result)\n"
    )
    twice = LATE_LOOP_HEAD + phrase * 2
    found = periodic_end(twice)
    assert found is not None and found[1] >= LOOP_END_CHARS
    assert found[1] < LOOP_END_REPEATS * found[0]
    short = LATE_LOOP_HEAD + "        self.item = item\n" * LOOP_END_REPEATS
    found = periodic_end(short)
    assert found is not None and found[1] >= LOOP_END_REPEATS * found[0]
    assert found[1] < LOOP_END_CHARS
    for text in (twice, short):
        v = check_answer("r", 1.0, text, 192, 1.0, stats, n_spec=7)
        assert v is not None and v.flag is None, v.evidence


def test_ordinary_code_and_prose_do_not_end_in_a_loop() -> None:
    # This package's code and docs, cut at every line end: none ends in a repeated piece over
    # LOOP_END_CHARS characters (the longest: a separator line of about 75 characters).
    root = Path(quality.__file__).resolve().parents[2]
    texts = [p.read_text(encoding="utf-8") for p in sorted(root.rglob("*.py"))]
    docs = root.parents[1] / "docs"
    texts += [p.read_text(encoding="utf-8") for p in sorted(docs.glob("*.md"))]
    assert len(texts) > 50
    for text in texts:
        for end in (i + 1 for i, c in enumerate(text) if c == "\n"):
            found = periodic_end(text[max(0, end - 2048) : end])
            assert found is None or found[1] < LOOP_END_CHARS, (text[:60], end, found)
