"""The vanilla-speed flag: each reason triggered on its own, and what must not be flagged."""

from __future__ import annotations

from dataclasses import replace

from specmon.core.detectors.vanilla import VanillaContext, judge, throttle_evidence
from specmon.core.events import GpuReading
from specmon.core.gpu_reasons import decode_clock_event_reasons
from specmon.core.stream_stats import RequestStats, ServerSpecStats

BASE = 60.0  # vanilla tok/s (the seed's Gemma 4 26B-A4B figure)


def stats(**kw) -> RequestStats:
    base = dict(
        request_id="r",
        outcome="ok",
        error=None,
        t_send=0.0,
        t_end=10.0,
        completion_tokens=1024,
        prompt_tokens=256,
        max_tokens=1024,
        ttft_s=0.2,
        e2el_s=5.0,
        tpot_s=0.005,
        decode_tok_s=220.0,
        e2e_tok_s=200.0,
        itl_s=(),
        chunk_tokens=(),
        decode_chunks=250,
        merged_chunks=0,
        single_token_chunks=10,
        client_acceptance_length=4.0,
        server_spec=None,
    )
    base.update(kw)
    return RequestStats(**base)


CTX = VanillaContext(baseline_tok_s=BASE, spec_configured=True, n_spec=8)
HOT = GpuReading(index=0, temperature_c=91, slowdown_temperature_c=90, clock_event_reasons=())
CAPPED = GpuReading(index=0, temperature_c=70, clock_event_reasons=("sw_power_cap",))
IDLE = GpuReading(index=0, temperature_c=40, clock_event_reasons=("gpu_idle",))


def test_fast_request_is_not_flagged():
    v = judge(stats(), CTX)
    assert v.flagged is False and v.reasons == () and v.judged


def test_acceptance_near_zero_alone():
    v = judge(stats(decode_tok_s=200.0, client_acceptance_length=1.0), CTX)
    assert v.flagged and v.codes == ("acceptance_near_zero",)


def test_acceptance_near_zero_from_server_per_request_numbers_without_baseline():
    server = ServerSpecStats(
        mean_acceptance_length=1.0,
        num_spec_steps=300,
        num_accepted_draft_tokens=0,
        num_draft_tokens=2400,
    )
    ctx = VanillaContext(baseline_tok_s=None, spec_configured=None)
    v = judge(stats(server_spec=server, client_acceptance_length=None), ctx)
    assert v.codes == ("acceptance_near_zero",)


def test_net_loss_alone():
    v = judge(stats(decode_tok_s=58.0, client_acceptance_length=2.5), CTX)
    assert v.codes == ("net_loss",)
    assert "2.50" in v.reasons[0][1] and "60.0" in v.reasons[0][1]


def test_margin_is_one_sided_and_inclusive():
    assert judge(stats(decode_tok_s=BASE * 1.1), CTX).codes == ("net_loss",)
    assert not judge(stats(decode_tok_s=BASE * 1.1 + 0.01), CTX).flagged
    assert judge(stats(decode_tok_s=10.0), CTX).flagged  # far below vanilla: still the same flag


def test_throttling_alone_from_clock_event_reasons():
    v = judge(stats(decode_tok_s=55.0), replace(CTX, gpu_readings=(CAPPED,)))
    assert v.codes == ("throttling",)
    assert "sw_power_cap" in v.reasons[0][1]


def test_throttling_alone_from_temperature_at_slowdown():
    v = judge(stats(decode_tok_s=55.0), replace(CTX, gpu_readings=(HOT,)))
    assert v.codes == ("throttling",)


def test_idle_clock_reason_is_not_throttling():
    assert throttle_evidence([IDLE]) is None
    v = judge(stats(decode_tok_s=55.0), replace(CTX, gpu_readings=(IDLE,)))
    assert v.codes == ("net_loss",)


def test_batch_contention_alone_from_overlapping_requests():
    v = judge(stats(decode_tok_s=55.0), replace(CTX, overlapping_requests=3))
    assert v.codes == ("batch_contention",)


def test_batch_contention_alone_from_server_running_gauge():
    v = judge(stats(decode_tok_s=55.0), replace(CTX, server_running_max=4))
    assert v.codes == ("batch_contention",)
    assert "4" in v.reasons[0][1]


def test_contention_without_slowness_is_not_flagged():
    assert not judge(stats(), replace(CTX, overlapping_requests=3)).flagged


def test_spec_not_configured_alone():
    ctx = VanillaContext(baseline_tok_s=None, spec_configured=False)
    v = judge(stats(client_acceptance_length=1.0), ctx)
    assert v.codes == ("spec_not_configured",)
    assert judge(stats(), VanillaContext(n_spec=0)).codes == ("spec_not_configured",)


def test_short_request_alone():
    v = judge(stats(completion_tokens=8, max_tokens=8, decode_tok_s=40.0), CTX)
    assert v.codes == ("short_request",)
    assert "max_tokens 8" in v.reasons[0][1]


def test_slow_with_unknown_acceptance_is_vanilla_speed():
    v = judge(stats(decode_tok_s=50.0, client_acceptance_length=None), CTX)
    assert v.codes == ("vanilla_speed",)


def test_without_baseline_only_al_and_configuration_apply():
    ctx = VanillaContext(baseline_tok_s=None, spec_configured=True)
    assert not judge(stats(decode_tok_s=5.0), ctx).flagged
    assert judge(stats(client_acceptance_length=1.05), ctx).codes == ("acceptance_near_zero",)


def test_al_near_one_needs_drafts_proposed():
    # Unknown configuration and no server numbers: AL 1.0 could be a vanilla server.
    ctx = VanillaContext(baseline_tok_s=None, spec_configured=None)
    assert not judge(stats(client_acceptance_length=1.0), ctx).flagged
    # Too few decode chunks to judge AL from the client side.
    assert not judge(stats(client_acceptance_length=1.0, decode_chunks=2), CTX).flagged


def test_failed_requests_are_not_judged():
    v = judge(stats(outcome="failed", decode_tok_s=1.0), CTX)
    assert v.flagged is False and v.judged is False


def test_acceptance_near_zero_scales_with_the_number_of_drafts():
    # AL 1.5 is 3% of 16 drafts accepted per step (broken), but 12.5% of 4 (working, if weakly).
    wide = VanillaContext(baseline_tok_s=None, spec_configured=True, n_spec=16)
    narrow = VanillaContext(baseline_tok_s=None, spec_configured=True, n_spec=4)
    assert judge(stats(client_acceptance_length=1.5), wide).codes == ("acceptance_near_zero",)
    assert judge(stats(client_acceptance_length=1.5), narrow).flagged is False


def test_thermal_reasons_decoded_from_the_nvml_bitmask_count_as_throttling():
    hot = GpuReading(index=0, clock_event_reasons=decode_clock_event_reasons(0x40))  # hw thermal
    v = judge(
        stats(decode_tok_s=58.0, client_acceptance_length=2.5), replace(CTX, gpu_readings=(hot,))
    )
    assert "throttling" in v.codes
    assert "hw_thermal_slowdown" in dict(v.reasons)["throttling"]
