"""The response shapes of vLLM's OpenAI server: streamed chunks (SSE) and whole responses.

Pure (no I/O): the engine hands over tokens and counts, these functions give back the bytes or the
object to send. Shapes follow vLLM 0.32 as the golden captures show them (tests/golden/sse,
tests/golden/http), the per-request `metrics` object included (reference §3.3).
"""

from __future__ import annotations

from typing import Any

from specmon.sim.jsonwire import JsonObject, dumps
from specmon.sim.request_body import GenerationRequest

TIMING_METRICS = (
    "time_to_first_token_ms",
    "generation_time_ms",
    "queue_time_ms",
    "mean_itl_ms",
    "tokens_per_second",
)
"""vLLM's per-request timing fields (`--enable-per-request-metrics`): null in a whole response's
`metrics` and left out of a streamed one when the flag is off."""


def timing_metrics(
    *, queue_s: float, ttft_s: float, generation_s: float, tokens: int, since_scheduled_s: float
) -> JsonObject:
    """The timing fields as vLLM computes them (reference §3.3): TTFT from scheduling,
    mean ITL = generation / (tokens - 1), tok/s = tokens / (last token - scheduled)."""
    return {
        "time_to_first_token_ms": round(ttft_s * 1000.0, 3),
        "generation_time_ms": round(generation_s * 1000.0, 3),
        "queue_time_ms": round(queue_s * 1000.0, 3),
        "mean_itl_ms": round(generation_s * 1000.0 / (tokens - 1), 3) if tokens > 1 else None,
        "tokens_per_second": round(tokens / since_scheduled_s, 3)
        if since_scheduled_s > 0
        else None,
    }


def stream_metrics(spec: JsonObject | None, timing: JsonObject | None = None) -> JsonObject | None:
    """`metrics` of the final usage chunk: vLLM dumps it with exclude_none, so only the set
    timing fields and `speculative_decoding` remain, the latter without the per-step arrays at
    the summary level."""
    out: JsonObject = {k: v for k, v in (timing or {}).items() if v is not None}
    if spec is not None:
        out["speculative_decoding"] = {k: v for k, v in spec.items() if v is not None}
    return out or None


def response_metrics(
    spec: JsonObject | None, timing: JsonObject | None = None
) -> JsonObject | None:
    """`metrics` of a whole response: every field, null where unset; the per-step arrays are
    null at the summary level. None (JSON null) when the server gives no per-request metrics."""
    if spec is None and timing is None:
        return None
    full: JsonObject | None = None
    if spec is not None:
        full = {**spec}
        for key in ("per_step_accepted", "per_step_drafted"):
            full.setdefault(key, None)
    return {**dict.fromkeys(TIMING_METRICS), **(timing or {}), "speculative_decoding": full}


def usage(prompt: int, completion: int) -> JsonObject:
    return {
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion,
        "completion_tokens": completion,
    }


def fingerprint(vllm_version: str, seed: int) -> str:
    """`system_fingerprint` as vLLM writes it: `vllm-<version>-<8 hex>`."""
    return f"vllm-{vllm_version}-{(seed * 2654435761) & 0xFFFFFFFF:08x}"


class ChunkWriter:
    """Builds the SSE data messages of one streamed response.

    The terminal message carries `system_fingerprint`: the usage chunk with include_usage, else
    the last content chunk. Continuous usage adds `usage` (with `completion_tokens_details`) to
    every choice chunk.
    """

    def __init__(
        self, req: GenerationRequest, request_id: str, created: int, system_fingerprint: str
    ) -> None:
        self.req = req
        self.fingerprint = system_fingerprint
        self.base = {
            "id": request_id,
            "object": "chat.completion.chunk" if req.chat else "text_completion",
            "created": created,
            "model": req.model,
        }
        self.prompt_tokens = len(req.prompt_ids)
        # the hot path: a content chunk without usage, as prefix + JSON string + suffix
        marker = "\x00"
        line = dumps({**self.base, "choices": [self._choice(marker, None)]})
        head, tail = line.split(dumps(marker), 1)
        self._prefix = ("data: " + head).encode()
        self._suffix = (tail + "\n\n").encode()

    def _choice(self, text: str, finish: str | None) -> JsonObject:
        if self.req.chat:
            choice: dict[str, Any] = {
                "index": 0,
                "delta": {"content": text},
                "logprobs": None,
                "finish_reason": finish,
            }
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
        if finish is not None:
            choice["stop_reason"] = None
        choice["token_ids"] = None
        return choice

    def _usage(self, completion_tokens: int) -> JsonObject:
        return {**usage(self.prompt_tokens, completion_tokens), "completion_tokens_details": None}

    @staticmethod
    def _message(obj: JsonObject) -> bytes:
        return ("data: " + dumps(obj) + "\n\n").encode()

    def role(self) -> bytes | None:
        """The first chat chunk, `delta: {"role": "assistant", "content": ""}` (chat only)."""
        if not self.req.chat:
            return None
        choice = {
            "index": 0,
            "delta": {"role": "assistant", "content": ""},
            "logprobs": None,
            "finish_reason": None,
        }
        obj: dict[str, Any] = {**self.base, "choices": [choice]}
        if self.req.continuous_usage:
            obj["usage"] = self._usage(0)
        obj["prompt_token_ids"] = None
        obj["prompt_text"] = None
        return self._message(obj)

    def content(self, text: str, completion_tokens: int, finish: str | None = None) -> bytes:
        """One step's tokens; `finish` on the last one; cumulative usage when continuous."""
        if finish is None and not self.req.continuous_usage:
            return self._prefix + dumps(text).encode() + self._suffix
        obj: dict[str, Any] = {**self.base, "choices": [self._choice(text, finish)]}
        if self.req.continuous_usage:
            obj["usage"] = self._usage(completion_tokens)
        if finish is not None and not self.req.include_usage:
            obj["system_fingerprint"] = self.fingerprint
        return self._message(obj)

    def usage_chunk(
        self,
        completion_tokens: int,
        spec: JsonObject | None = None,
        timing: JsonObject | None = None,
    ) -> bytes:
        """The final `choices: []` chunk with usage (include_usage); with the request's
        `metrics.speculative_decoding` object when the server gives one (the only chunk that
        carries it)."""
        obj: JsonObject = {
            **self.base,
            "choices": [],
            "usage": usage(self.prompt_tokens, completion_tokens),
            "system_fingerprint": self.fingerprint,
        }
        metrics = stream_metrics(spec, timing)
        if metrics is not None:
            obj["metrics"] = metrics
        return self._message(obj)

    DONE = b"data: [DONE]\n\n"


def full_response(
    req: GenerationRequest,
    request_id: str,
    created: int,
    text: str,
    completion_tokens: int,
    finish: str,
    system_fingerprint: str,
    spec: JsonObject | None = None,
    timing: JsonObject | None = None,
) -> JsonObject:
    """The non-streamed chat.completion / text_completion object; `spec` is the request's
    `metrics.speculative_decoding` object (None: `metrics` is null)."""
    if req.chat:
        choice: dict[str, Any] = {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": text,
                "refusal": None,
                "annotations": None,
                "audio": None,
                "function_call": None,
                "reasoning": None,
            },
            "logprobs": None,
            "finish_reason": finish,
            "stop_reason": None,
            "token_ids": None,
            "routed_experts": None,
        }
        obj = "chat.completion"
    else:
        choice = {
            "index": 0,
            "text": text,
            "logprobs": None,
            "finish_reason": finish,
            "stop_reason": None,
            "token_ids": None,
            "prompt_logprobs": None,
            "prompt_token_ids": None,
            "routed_experts": None,
        }
        obj = "text_completion"
    response: JsonObject = {
        "id": request_id,
        "object": obj,
        "created": created,
        "model": req.model,
        "choices": [choice],
        "service_tier": None,
        "system_fingerprint": system_fingerprint,
        "usage": {
            **usage(len(req.prompt_ids), completion_tokens),
            "prompt_tokens_details": None,
            "completion_tokens_details": None,
        },
    }
    if req.chat:  # a text_completion has no prompt fields at the top level
        response.update(prompt_logprobs=None, prompt_token_ids=None, prompt_text=None)
    response.update(
        kv_transfer_params=None, ec_transfer_params=None, metrics=response_metrics(spec, timing)
    )
    return response
