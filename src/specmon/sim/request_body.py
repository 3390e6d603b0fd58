"""A generation request as vLLM's OpenAI server validates it: the body parsed, checked and
reduced to a GenerationRequest, or an ApiError with vLLM's status and wording.

Pure (no I/O). Rules and messages follow vLLM 0.32 (reference §3) and the golden captures of a real
server (tests/golden/http).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from specmon.sim import tokenizer
from specmon.sim.api_errors import ApiError, validation_error
from specmon.sim.faults import NO_FAULTS, FaultError, Faults, parse_faults
from specmon.sim.jsonwire import JsonObject


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """A validated chat or completions request."""

    chat: bool
    prompt_ids: list[int]
    max_tokens: int
    stream: bool
    include_usage: bool
    continuous_usage: bool
    ignore_eos: bool
    model: str
    faults: Faults
    request_id: str | None = None
    """vLLM's `request_id` body field: the id the server uses (`chatcmpl-` + it) and, with a
    truth file, the key of the request's truth line (sim.truth)."""


def bool_field(body: JsonObject, key: str, default: bool = False) -> bool:
    value = body.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ApiError(400, f"{key}: Input should be a valid boolean")
    return value


def _optional_int(body: JsonObject, key: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(400, f"{key}: Input should be a valid integer")
    return value


def _check_temperature(body: JsonObject) -> None:
    """A number >= 0 (or absent), as vLLM's SamplingParams insists."""
    value = body.get("temperature")
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ApiError(400, "temperature: Input should be a valid number", param="temperature")
    value = float(value)
    if value < 0.0:
        raise ApiError(
            400,
            f"temperature must be non-negative, got {value}. "
            f"(parameter=temperature, value={value})",
            param="temperature",
        )


def parse_json_body(raw: bytes) -> JsonObject:
    """The request body as a JSON object, or a 400 ApiError."""
    try:
        body = json.loads(raw)
    except json.JSONDecodeError as err:
        raise validation_error(
            "json_invalid", f"body.{err.pos}", "JSON decode error", 0, err.msg
        ) from None
    except UnicodeDecodeError:
        raise validation_error(
            "json_invalid", "body.0", "JSON decode error", 0, "invalid UTF-8"
        ) from None
    except RecursionError:  # nested too deep; FastAPI's generic parse failure
        raise ApiError(400, "There was an error parsing the body", "Bad Request") from None
    if not isinstance(body, dict):
        raise ApiError(400, "Input should be a valid dictionary or object to extract fields from")
    return body


def request_faults(body: JsonObject, header: str | None) -> Faults:
    """Faults asked for by the `X-Specmon-Fault` header and/or the `specmon_fault` body field."""
    faults = NO_FAULTS
    for source in (body.get("specmon_fault"), header):
        if source is None:
            continue
        if not isinstance(source, str):
            raise ApiError(400, "specmon_fault must be a string")
        try:
            faults = faults.merged(parse_faults(source))
        except FaultError as err:
            raise ApiError(400, str(err)) from None
    return faults


def prompt_ids_for_chat(body: JsonObject) -> list[int]:
    messages = body.get("messages")
    if messages is None:
        raise validation_error("missing", "body.messages", "Field required", len(body))
    try:
        text = tokenizer.apply_chat_template(
            messages, add_generation_prompt=bool_field(body, "add_generation_prompt", True)
        )
    except tokenizer.TemplateError as err:
        raise ApiError(400, str(err)) from None
    return tokenizer.encode(text, add_special_tokens=False)


def prompt_ids_for_completion(body: JsonObject) -> list[int]:
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        return tokenizer.encode(prompt, add_special_tokens=True)
    if (
        isinstance(prompt, list)
        and prompt
        and all(
            isinstance(t, int) and not isinstance(t, bool) and 0 <= t < tokenizer.VOCAB_SIZE
            for t in prompt
        )
    ):
        return list(prompt)
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        return tokenizer.encode(prompt[0], add_special_tokens=True)
    if prompt is None:
        raise ApiError(400, "prompt: Field required")
    raise ApiError(
        400, "prompt must be a string or a list of token ids (one prompt per request here)"
    )


def parse_generation(
    body: JsonObject,
    chat: bool,
    served_model: str,
    max_model_len: int,
    fault_header: str | None,
) -> GenerationRequest:
    """Validate a chat/completions body the way vLLM does; ApiError with its status if bad."""
    model = body.get("model")
    if model is not None and model != served_model:
        raise ApiError(
            404,
            f"The model `{model}` does not exist. Valid aliases: {served_model}.",
            "NotFoundError",
            "model",
        )
    stream = bool_field(body, "stream")
    options = body.get("stream_options")
    if options is not None:
        if not stream:
            raise ApiError(
                400,
                "Stream options can only be defined when `stream=True`. (parameter=stream_options)",
                param="stream_options",
            )
        if not isinstance(options, dict):
            raise ApiError(400, "stream_options: Input should be a valid dictionary")
    include_usage = bool(options and options.get("include_usage"))
    continuous = bool(options and options.get("continuous_usage_stats")) and include_usage
    n = _optional_int(body, "n")
    if n is not None and n < 1:
        raise ApiError(400, "n must be at least 1.")
    if n is not None and n > 1:
        if body.get("temperature") == 0:
            raise ApiError(400, f"n must be 1 when using greedy sampling, got {n}.")
        raise ApiError(400, f"n={n} is not supported by the simulated server: only n=1.")
    _check_temperature(body)
    prompt_ids = prompt_ids_for_chat(body) if chat else prompt_ids_for_completion(body)
    max_tokens = _optional_int(body, "max_completion_tokens") if chat else None
    if max_tokens is None:
        max_tokens = _optional_int(body, "max_tokens")
    if max_tokens is not None and max_tokens < 1:
        raise ApiError(400, f"max_tokens must be at least 1, got {max_tokens}.")
    prompt_len = len(prompt_ids)
    if prompt_len >= max_model_len:
        raise ApiError(
            400,
            f"This model's maximum context length is {max_model_len} tokens. However, your "
            f"request has {prompt_len} input tokens. Please reduce the length of the input "
            "messages.",
        )
    if max_tokens is not None and max_tokens > max_model_len:
        raise ApiError(
            400,
            f"max_tokens={max_tokens} cannot be greater than max_model_len={max_model_len}. "
            f"Please request fewer output tokens. (parameter=max_tokens, value={max_tokens})",
            param="max_tokens",
        )
    if max_tokens is None:
        max_tokens = max_model_len - prompt_len
    elif prompt_len + max_tokens > max_model_len:
        raise ApiError(
            400,
            f"This model's maximum context length is {max_model_len} tokens. However, you "
            f"requested {prompt_len + max_tokens} tokens ({prompt_len} in the messages, "
            f"{max_tokens} in the completion). Please reduce the length of the messages or "
            "completion.",
        )
    return GenerationRequest(
        chat=chat,
        prompt_ids=prompt_ids,
        max_tokens=max_tokens,
        stream=stream,
        include_usage=include_usage,
        continuous_usage=continuous,
        ignore_eos=bool_field(body, "ignore_eos"),
        model=served_model,
        faults=request_faults(body, fault_header),
        request_id=body_request_id(body),
    )


def body_request_id(body: JsonObject) -> str | None:
    """vLLM's optional `request_id` body field (a string), None when absent."""
    value = body.get("request_id")
    if value is None:
        return None
    if not isinstance(value, str):
        raise ApiError(400, "request_id: Input should be a valid string", param="request_id")
    return value
