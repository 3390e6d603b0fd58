"""Bench settings and their validation: every bad value gets one line naming the valid range."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

MAX_TOKENS_LIMIT = 10_000_000
MAX_PROMPTS = 1_000_000
MAX_CONCURRENCY = 10_000
MAX_DURATION_S = 7 * 24 * 3600.0
MAX_TEMPERATURE = 100.0
MAX_WARMUPS = 10_000
MAX_REQUEST_RATE = 1e6
MAX_SEED = 2**31 - 1
MAX_REPEATS = 1000
"""A sweep's runs per point; repeat r runs with seed + 1000 * (r - 1)."""
MAX_CONSECUTIVE_ERRORS = 1_000_000
MAX_TEXT_CHARS = 4096
"""The longest dataset path or model name read back from a file."""


class ConfigError(ValueError):
    """A bad setting; str() is the one-line message for the user."""


@dataclass(frozen=True, slots=True)
class BenchConfig:
    """What one bench run does (the seeds' method by default, except ignore_eos: opt in)."""

    input_len: int = 256
    output_len: int = 1024
    num_prompts: int = 20
    warmups: int = 2
    concurrency: int = 1
    request_rate: float = math.inf
    duration_s: float | None = None
    temperature: float = 0.0
    ignore_eos: bool = False
    dataset: str = "random"
    seed: int = 0
    model: str | None = None
    max_consecutive_errors: int = 10
    """A run stops as "engine dead" after this many failed requests in a row."""
    extra_body: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["request_rate"] = "inf" if math.isinf(self.request_rate) else self.request_rate
        return d

    @staticmethod
    def from_dict(d: dict[str, Any]) -> BenchConfig:
        known = {k: v for k, v in d.items() if k in BenchConfig.__dataclass_fields__}
        rate = known.get("request_rate")
        if rate == "inf" or rate is None:
            known["request_rate"] = math.inf
        return BenchConfig(**known)


def check_config(config: BenchConfig, prefix: str = "config") -> BenchConfig:
    """A BenchConfig read back from a file (a bench result, a sweep's sweep.json), each value
    in the range its flag allows: LimitError ("config.num_prompts 0 is out of range ...")
    otherwise."""
    from specmon.bench.limits import LimitError, check_int, check_number

    c = config
    ints = (
        ("input_len", c.input_len, 1, MAX_TOKENS_LIMIT),
        ("output_len", c.output_len, 1, MAX_TOKENS_LIMIT),
        ("num_prompts", c.num_prompts, 1, MAX_PROMPTS),
        ("warmups", c.warmups, 0, MAX_WARMUPS),
        ("concurrency", c.concurrency, 1, MAX_CONCURRENCY),
        ("seed", c.seed, 0, MAX_SEED + 1000 * MAX_REPEATS),  # a sweep's repeats add to it
        ("max_consecutive_errors", c.max_consecutive_errors, 1, MAX_CONSECUTIVE_ERRORS),
    )
    for name, value, lo, hi in ints:
        check_int(value, f"{prefix}.{name}", lo, hi)
    if c.request_rate != math.inf:
        check_number(
            c.request_rate, f"{prefix}.request_rate", 0.0, MAX_REQUEST_RATE, optional=False
        )
        if c.request_rate == 0:
            raise LimitError(f"{prefix}.request_rate 0 is out of range (above 0, or inf)")
    if c.duration_s is not None:
        check_number(c.duration_s, f"{prefix}.duration_s", 0.0, MAX_DURATION_S, unit="s")
    check_number(c.temperature, f"{prefix}.temperature", 0.0, MAX_TEMPERATURE, optional=False)
    if not isinstance(c.ignore_eos, bool):
        raise LimitError(f"{prefix}.ignore_eos is not true or false")
    for name, text, optional in (("dataset", c.dataset, False), ("model", c.model, True)):
        if text is None and optional:
            continue
        if not isinstance(text, str) or not text or len(text) > MAX_TEXT_CHARS:
            raise LimitError(f"{prefix}.{name} is not a text of 1 to {MAX_TEXT_CHARS:,} characters")
    if not isinstance(c.extra_body, dict):
        raise LimitError(f"{prefix}.extra_body is not an object")
    return config


def parse_int(flag: str, text: object, lo: int, hi: int) -> int:
    """An integer flag within lo..hi, else ConfigError naming the range."""
    try:
        value = int(str(text).strip())
    except ValueError:
        raise ConfigError(f"{flag} must be an integer from {lo} to {hi}, got {text!r}") from None
    if not lo <= value <= hi:
        raise ConfigError(f"{flag} must be an integer from {lo} to {hi}, got {value}")
    return value


def parse_float(
    flag: str, text: object, lo: float, hi: float, *, lo_open: bool = False, allow_inf: bool = False
) -> float:
    """A finite number flag within lo..hi (lo excluded when lo_open), `inf` when allowed."""
    bracket = "(" if lo_open else "["
    valid = f"a number in {bracket}{lo:g}, {hi:g}]" + (" or inf" if allow_inf else "")
    try:
        value = float(str(text).strip())
    except ValueError:
        raise ConfigError(f"{flag} must be {valid}, got {text!r}") from None
    if allow_inf and value == math.inf:
        return value
    if not math.isfinite(value) or value < lo or value > hi or (lo_open and value == lo):
        raise ConfigError(f"{flag} must be {valid}, got {text}")
    return value


def parse_int_list(flag: str, text: str, lo: int, hi: int) -> tuple[int, ...]:
    """A comma-separated list of distinct integers in lo..hi (e.g. `0,4,8`), kept in order."""
    items = [p.strip() for p in str(text).split(",") if p.strip()]
    if not items:
        raise ConfigError(f"{flag} must be a comma-separated list of integers from {lo} to {hi}")
    values: list[int] = []
    for item in items:
        try:
            v = int(item)
        except ValueError:
            raise ConfigError(
                f"{flag} must be a comma-separated list of integers from {lo} to {hi}, got {item!r}"
            ) from None
        if not lo <= v <= hi:
            raise ConfigError(f"{flag} values must be integers from {lo} to {hi}, got {v}")
        if v in values:
            raise ConfigError(f"{flag} lists {v} twice")
        values.append(v)
    return tuple(values)


def parse_duration(text: str) -> float:
    """`90`, `90s`, `15m`, `2h` → seconds (ConfigError naming the forms and the range)."""
    raw = str(text).strip().lower()
    factor = 1.0
    for suffix, mult in (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if raw.endswith(suffix) and raw[: -len(suffix)].strip():
            try:
                float(raw[: -len(suffix)])
            except ValueError:
                continue
            raw, factor = raw[: -len(suffix)], mult
            break
    try:
        value = float(raw) * factor
    except ValueError:
        raise ConfigError(
            f"--duration must be seconds (or 90s, 15m, 2h) in (0, {MAX_DURATION_S:g}], got {text!r}"
        ) from None
    if not math.isfinite(value) or not 0 < value <= MAX_DURATION_S:
        raise ConfigError(
            f"--duration must be seconds (or 90s, 15m, 2h) in (0, {MAX_DURATION_S:g}], got {text!r}"
        )
    return value


ServeGrid = tuple[tuple[str, tuple[str, ...]], ...]
"""Serve-parameter grid: ((name, (value, ...)), ...), names in underscore form."""

GRID_RESERVED = frozenset(
    {"host", "port", "model", "speculative_config", "sc", "num_speculative_tokens", "n_spec"}
)
"""Serve options a grid may not set: specmon sets them (n_spec has its own --n-spec list)."""

GRID_INTEGER_RANGES: dict[str, tuple[int, int]] = {
    "max_num_batched_tokens": (1, MAX_TOKENS_LIMIT),
    "max_num_seqs": (1, MAX_CONCURRENCY * 100),
    "max_model_len": (1, MAX_TOKENS_LIMIT),
    "tensor_parallel_size": (1, 1024),
    "pipeline_parallel_size": (1, 1024),
    "data_parallel_size": (1, 1024),
}
"""Grid options whose values are checked as integers in a range before anything starts."""


def _grid_name(raw: str) -> str:
    name = raw.strip().lstrip("-").replace("-", "_").lower()
    if not name or not all(ch.isalnum() or ch == "_" for ch in name) or not name[0].isalpha():
        raise ConfigError(
            "--serve-grid needs NAME=V1,V2 with NAME a `vllm serve` option such as "
            f"max_num_batched_tokens, got {raw!r}"
        )
    if name in GRID_RESERVED:
        raise ConfigError(
            f"--serve-grid cannot set {name}: specmon sets it (n_spec values go in --n-spec)"
        )
    return name


def parse_serve_grid(items: list[str]) -> ServeGrid:
    """`NAME=V1,V2` items (`max_num_batched_tokens=4096,8192`) into a grid, checked: a one-line
    ConfigError for a bad name, an empty or repeated value, a name given twice, or an integer
    option's value out of its range."""
    grid: list[tuple[str, tuple[str, ...]]] = []
    for item in items:
        raw_name, sep, raw_values = str(item).partition("=")
        if not sep:
            raise ConfigError(
                f"--serve-grid must be NAME=V1,V2 (e.g. max_num_batched_tokens=4096,8192), "
                f"got {item!r}"
            )
        name = _grid_name(raw_name)
        flag = f"--{name.replace('_', '-')}"
        if any(name == n for n, _ in grid):
            raise ConfigError(f"{flag} is given twice in the serve grid")
        values = [v.strip() for v in raw_values.split(",")]
        if not values or any(not v for v in values):
            raise ConfigError(
                f"{flag} must be a comma-separated list of values, got {raw_values!r}"
            )
        for v in values:
            if any(ch.isspace() for ch in v):
                raise ConfigError(f"{flag} values cannot contain spaces, got {v!r}")
        if name in GRID_INTEGER_RANGES:
            lo, hi = GRID_INTEGER_RANGES[name]
            values = [str(v) for v in parse_int_list(flag, raw_values, lo, hi)]
        elif len(set(values)) != len(values):
            raise ConfigError(f"{flag} lists a value twice")
        grid.append((name, tuple(values)))
    return tuple(grid)


def grid_combinations(grid: ServeGrid) -> list[tuple[tuple[str, str], ...]]:
    """Every combination of the grid's values, the first option varying slowest; [()] for none."""
    combos: list[tuple[tuple[str, str], ...]] = [()]
    for name, values in grid:
        combos = [(*c, (name, v)) for c in combos for v in values]
    return combos
