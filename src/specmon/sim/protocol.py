"""The OpenAI-compatible wire shapes of vLLM: request validation, error bodies, chunks, responses.

Pure (no I/O): the server feeds it parsed bodies and sends what it returns. Shapes follow vLLM's
serving code (reference §3) and the golden captures of a real server in tests/golden/.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from specmon.sim import tokenizer
from specmon.sim.faults import NO_FAULTS as _NO_FAULTS
from specmon.sim.faults import FaultError, Faults, parse_faults

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def dumps(obj: Any) -> str:
    """Compact JSON, UTF-8 kept as is (like pydantic's model_dump_json)."""
    return _dumps(obj)


class ApiError(Exception):
    """An error answer: HTTP status and vLLM's error body."""

    def __init__(
        self, status: int, message: str, err_type: str | None = None, param: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.err_type = err_type or error_type(status)
        self.param = param

    def body(self) -> bytes:
        return error_body(self.status, self.message, self.err_type, self.param)


def validation_error(kind: str, loc: str, msg: str, items: int, ctx: str | None = None) -> ApiError:
    """A request-validation error as vLLM 0.32 words it (type "Bad Request", param = loc)."""
    detail = (
        f"{{'type': '{kind}', 'loc': '{loc}', 'msg': '{msg}', 'input': '<dict of {items} items>'"
    )
    if ctx is not None:
        detail += f", 'ctx': {{'error': '{ctx}'}}"
    return ApiError(400, f"1 validation error:\n  {detail}}}", "Bad Request", loc)


def error_type(status: int) -> str:
    """vLLM's error `type` for a status: BadRequestError, NotFoundError, InternalServerError…"""
    named = {
        400: "BadRequestError",
        401: "AuthenticationError",
        404: "NotFoundError",
        422: "UnprocessableEntityError",
        500: "InternalServerError",
    }
    if status in named:
        return named[status]
    phrase = HTTPStatus(status).phrase.title().replace(" ", "").replace("-", "")
    return phrase if phrase.endswith("Error") else phrase + "Error"


def error_body(
    status: int, message: str, err_type: str | None = None, param: str | None = None
) -> bytes:
    """`{"error": {"message", "type", "param", "code"}}` as vLLM's ErrorResponse."""
    return dumps(
        {
            "error": {
                "message": message,
                "type": err_type or error_type(status),
                "param": param,
                "code": status,
            }
        }
    ).encode()


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


def _bool(body: dict, key: str, default: bool = False) -> bool:
    value = body.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ApiError(400, f"{key}: Input should be a valid boolean")
    return value


def _optional_int(body: dict, key: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(400, f"{key}: Input should be a valid integer")
    return value


def _check_temperature(body: dict) -> None:
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


def parse_json_body(raw: bytes) -> dict:
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


def request_faults(body: dict, header: str | None) -> Faults:
    """Faults asked for by the `X-Specmon-Fault` header and/or the `specmon_fault` body field."""
    faults = _NO_FAULTS
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


def prompt_ids_for_chat(body: dict) -> list[int]:
    messages = body.get("messages")
    if messages is None:
        raise validation_error("missing", "body.messages", "Field required", len(body))
    try:
        text = tokenizer.apply_chat_template(
            messages, add_generation_prompt=_bool(body, "add_generation_prompt", True)
        )
    except tokenizer.TemplateError as err:
        raise ApiError(400, str(err)) from None
    return tokenizer.encode(text, add_special_tokens=False)


def prompt_ids_for_completion(body: dict) -> list[int]:
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
    body: dict,
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
    stream = _bool(body, "stream")
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
        ignore_eos=_bool(body, "ignore_eos"),
        model=served_model,
        faults=request_faults(body, fault_header),
    )


# ------------------------------------------------------------------ response shapes
# As vLLM 0.32 serialises them (tests/golden/sse, tests/golden/http/chat-t0-nonstream.json).


def usage(prompt: int, completion: int) -> dict:
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

    def _choice(self, text: str, finish: str | None) -> dict:
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

    def _usage(self, completion_tokens: int) -> dict:
        return {**usage(self.prompt_tokens, completion_tokens), "completion_tokens_details": None}

    @staticmethod
    def _message(obj: dict) -> bytes:
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

    def usage_chunk(self, completion_tokens: int) -> bytes:
        """The final `choices: []` chunk with usage (include_usage)."""
        return self._message(
            {
                **self.base,
                "choices": [],
                "usage": usage(self.prompt_tokens, completion_tokens),
                "system_fingerprint": self.fingerprint,
            }
        )

    DONE = b"data: [DONE]\n\n"


def full_response(
    req: GenerationRequest,
    request_id: str,
    created: int,
    text: str,
    completion_tokens: int,
    finish: str,
    system_fingerprint: str,
) -> dict:
    """The non-streamed chat.completion / text_completion object."""
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
        }
        obj = "text_completion"
    return {
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
        "prompt_logprobs": None,
        "prompt_token_ids": None,
        "prompt_text": None,
        "kv_transfer_params": None,
        "ec_transfer_params": None,
        "metrics": None,
    }
