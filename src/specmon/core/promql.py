"""PromQL for reading a vLLM fleet through a Prometheus, and the parsing of its answers.

The expressions are those of vLLM's Grafana spec-decode dashboard (reference: AL = 1 +
rate(accepted) / rate(drafts), per position by the `position` label), summed over engines and
grouped by target (`instance`, `job`). Every quantity of one read goes in ONE instant query: each
expression is tagged with a `specmon_q` label by `label_replace` and the expressions are joined
with `or`, so a refresh of any number of targets is one HTTP request (plus the targets list).

Pure: builds query strings and turns the API's JSON (already decoded) into `FleetTarget`s.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from specmon.core import families
from specmon.core.events import FleetHistory, FleetTarget, GpuReading

TAG = "specmon_q"
"""The label that names which expression a result series came from."""

Matcher = tuple[str, str, str]
"""(label, operator, value) with operator one of =, !=, =~, !~."""

_MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*')


class MatchError(ValueError):
    """A --match selector that is not `{label="value", ...}`."""


def parse_match(selector: str | None) -> tuple[Matcher, ...]:
    """`{job="vllm", instance=~"gpu-.*"}` → matchers. Empty or None → no matcher."""
    if selector is None:
        return ()
    text = selector.strip()
    if not text:
        return ()
    if not (text.startswith("{") and text.endswith("}")):
        raise MatchError(f'--match must look like {{job="vllm"}}, got {selector!r}')
    inner = text[1:-1]
    out: list[Matcher] = []
    pos = 0
    while inner[pos:].strip():
        m = _MATCHER.match(inner, pos)
        if m is None:
            raise MatchError(f"cannot read the label matcher at {inner[pos:]!r} in {selector!r}")
        label, op, raw = m.groups()
        value = re.sub(r"\\(.)", r"\1", raw)
        if op in ("=~", "!~"):
            try:
                re.compile(value)
            except re.error as exc:
                raise MatchError(f"bad regular expression {value!r}: {exc}") from None
        out.append((label, op, value))
        pos = m.end()
        if pos < len(inner):
            if inner[pos] != ",":
                raise MatchError(f"expected a comma at {inner[pos:]!r} in {selector!r}")
            pos += 1
    return tuple(out)


def matches(labels: dict[str, str], matchers: tuple[Matcher, ...]) -> bool:
    """Whether a target's labels satisfy every matcher (regexes anchored, as in Prometheus)."""
    for label, op, value in matchers:
        have = labels.get(label, "")
        if op == "=" and have != value:
            return False
        if op == "!=" and have == value:
            return False
        if op == "=~" and re.fullmatch(value, have) is None:
            return False
        if op == "!~" and re.fullmatch(value, have) is not None:
            return False
    return True


def selector_text(matchers: tuple[Matcher, ...]) -> str:
    """The matchers back as PromQL text inside braces (values escaped)."""
    parts = []
    for label, op, value in matchers:
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        parts.append(f'{label}{op}"{escaped}"')
    return ",".join(parts)


def _sel(name: str, matchers: tuple[Matcher, ...]) -> str:
    return f"{name}{{{selector_text(matchers)}}}"


def _duration(seconds: float) -> str:
    return f"{max(1, round(seconds))}s"


def fleet_expressions(matchers: tuple[Matcher, ...], window_s: float) -> dict[str, str]:
    """Tag → PromQL expression for one instant read of every target."""
    w = _duration(window_s)
    by = "instance, job"

    def rate(name: str, extra: str = "") -> str:
        return f"sum by ({by}{extra}) (rate({_sel(name, matchers)}[{w}]))"

    def total(name: str, extra: str = "") -> str:
        return f"sum by ({by}{extra}) ({_sel(name, matchers)})"

    kv_old = "vllm:gpu_cache_usage_perc"
    return {
        "gen_rate": rate(families.GENERATION_TOKENS),
        "drafts_rate": rate(families.SPEC_DRAFTS),
        "dtok_rate": rate(families.SPEC_DRAFT_TOKENS),
        "acc_rate": rate(families.SPEC_ACCEPTED),
        "pos_rate": rate(families.SPEC_ACCEPTED_PER_POS, ", position"),
        "gen": total(families.GENERATION_TOKENS),
        "drafts": total(families.SPEC_DRAFTS),
        "dtok": total(families.SPEC_DRAFT_TOKENS),
        "acc": total(families.SPEC_ACCEPTED),
        "pos": total(families.SPEC_ACCEPTED_PER_POS, ", position"),
        "running": total(families.REQUESTS_RUNNING),
        "waiting": total(families.REQUESTS_WAITING),
        "kv": f"max by ({by}) ({_sel(families.KV_CACHE_USAGE, matchers)} or "
        f"{_sel(kv_old, matchers)})",
    }


DCGM_FIELDS: dict[str, str] = {
    "DCGM_FI_DEV_GPU_TEMP": "temperature_c",
    "DCGM_FI_DEV_POWER_USAGE": "power_w",
    "DCGM_FI_DEV_FB_USED": "fb_used_mib",
    "DCGM_FI_DEV_FB_FREE": "fb_free_mib",
    "DCGM_FI_DEV_GPU_UTIL": "utilization_pct",
    "DCGM_FI_DEV_SM_CLOCK": "sm_clock_mhz",
    "DCGM_FI_DEV_MEM_CLOCK": "memory_clock_mhz",
}
"""dcgm-exporter series read for the fleet's GPUs (reference §6), and what each becomes."""


def tagged(expressions: dict[str, str]) -> str:
    """One PromQL expression giving every expression's series, each tagged with its name."""
    return " or ".join(
        f'label_replace({expr}, "{TAG}", "{tag}", "", "")' for tag, expr in expressions.items()
    )


def dcgm_expression() -> str:
    """Every dcgm-exporter series specmon reads, tagged with its field name (one query)."""
    return tagged({name: name for name in DCGM_FIELDS})


def history_expressions(matchers: tuple[Matcher, ...], window_s: float) -> dict[str, str]:
    """Tag → PromQL for the range read (the history of every target)."""
    e = fleet_expressions(matchers, window_s)
    return {k: e[k] for k in ("gen_rate", "acc_rate", "drafts_rate", "running", "kv")}


# ---------------------------------------------------------------- answers


class PromAnswerError(ValueError):
    """The Prometheus answered with something that is not a usable query result."""


def result_of(payload: Any, kind: str) -> list[dict[str, Any]]:
    """The `data.result` list of a query answer of result type `kind` ("vector" or "matrix")."""
    if not isinstance(payload, dict):
        raise PromAnswerError("the answer is not a JSON object")
    if payload.get("status") != "success":
        error = payload.get("error") or payload.get("errorType") or "no status"
        raise PromAnswerError(f"query failed: {str(error)[:300]}")
    data = payload.get("data")
    if not isinstance(data, dict) or data.get("resultType") != kind:
        raise PromAnswerError(f"expected a {kind} result")
    result = data.get("result")
    if not isinstance(result, list):
        raise PromAnswerError("the result is not a list")
    return [r for r in result if isinstance(r, dict) and isinstance(r.get("metric"), dict)]


def sample_value(raw: Any) -> float | None:
    """A Prometheus sample value ("1.5", "NaN", "+Inf") as a finite float, else None."""
    try:
        v = float(raw)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


@dataclass(frozen=True, slots=True)
class TargetListing:
    """A target from `/api/v1/targets` (or an `up` query)."""

    instance: str
    job: str
    health: str
    url: str | None = None
    last_error: str = ""


def targets_of(payload: Any, matchers: tuple[Matcher, ...]) -> list[TargetListing]:
    """The active targets that satisfy the matchers, from an `/api/v1/targets` answer."""
    if not isinstance(payload, dict) or payload.get("status") != "success":
        raise PromAnswerError("the targets list could not be read")
    data = payload.get("data")
    active = data.get("activeTargets") if isinstance(data, dict) else None
    if not isinstance(active, list):
        raise PromAnswerError("the targets list has no activeTargets")
    out = []
    for t in active:
        if not isinstance(t, dict) or not isinstance(t.get("labels"), dict):
            continue
        labels = {str(k): str(v) for k, v in t["labels"].items()}
        if not matches(labels, matchers) or "instance" not in labels:
            continue
        health = str(t.get("health", "unknown"))
        out.append(
            TargetListing(
                instance=labels["instance"],
                job=labels.get("job", ""),
                health=health if health in ("up", "down") else "unknown",
                url=str(t["scrapeUrl"]) if isinstance(t.get("scrapeUrl"), str) else None,
                last_error=str(t.get("lastError") or ""),
            )
        )
    return out


def targets_of_up(payload: Any) -> list[TargetListing]:
    """Targets from an instant `up{…}` query (when `/api/v1/targets` is not served)."""
    out = []
    for r in result_of(payload, "vector"):
        m = r["metric"]
        value = r.get("value")
        v = sample_value(value[1]) if isinstance(value, list) and len(value) == 2 else None
        out.append(
            TargetListing(
                instance=str(m.get("instance", "")),
                job=str(m.get("job", "")),
                health="up" if v == 1 else "down" if v == 0 else "unknown",
            )
        )
    return [t for t in out if t.instance]


Key = tuple[str, str]


def _host(instance: str) -> str:
    text = instance.split("://", 1)[-1]
    if text.startswith("["):
        return text[1 : text.find("]")] if "]" in text else text
    return text.rsplit(":", 1)[0] if text.count(":") == 1 else text


def _positions(values: dict[int, float]) -> tuple[float, ...] | None:
    if not values:
        return None
    n = max(values) + 1
    return tuple(values.get(i, 0.0) for i in range(n))


def fleet_targets(
    payload: Any,
    listing: list[TargetListing],
    known: set[Key],
    dcgm_payload: Any = None,
) -> list[FleetTarget]:
    """The vLLM targets of one read: a listed target is vLLM when the read has `vllm:` series of
    it, or when it was seen as vLLM before (`known`: a target that went down keeps its row)."""
    numbers: dict[Key, dict[str, float | None]] = {}
    pos: dict[Key, dict[str, dict[int, float]]] = {}
    for r in result_of(payload, "vector"):
        m = r["metric"]
        key = (str(m.get("instance", "")), str(m.get("job", "")))
        tag = str(m.get(TAG, ""))
        value = r.get("value")
        v = sample_value(value[1]) if isinstance(value, list) and len(value) == 2 else None
        if tag in ("pos_rate", "pos"):
            try:
                i = int(str(m.get("position", "")))
            except ValueError:
                continue
            if v is not None and 0 <= i < 256:
                pos.setdefault(key, {}).setdefault(tag, {})[i] = v
            numbers.setdefault(key, {})
        else:
            numbers.setdefault(key, {})[tag] = v
    gpus = _gpus_by_host(dcgm_payload) if dcgm_payload is not None else {}
    out = []
    for t in listing:
        key = (t.instance, t.job)
        if key not in numbers and key not in known:
            continue
        n = numbers.get(key, {})
        p = pos.get(key, {})
        out.append(
            FleetTarget(
                instance=t.instance,
                job=t.job,
                health=t.health,
                url=t.url,
                last_error=t.last_error,
                generation_tok_s=n.get("gen_rate"),
                drafts_per_s=n.get("drafts_rate"),
                draft_tokens_per_s=n.get("dtok_rate"),
                accepted_per_s=n.get("acc_rate"),
                accepted_per_pos_per_s=_positions(p.get("pos_rate", {})),
                generation_tokens=n.get("gen"),
                drafts=n.get("drafts"),
                draft_tokens=n.get("dtok"),
                accepted_tokens=n.get("acc"),
                accepted_per_pos=_positions(p.get("pos", {})),
                requests_running=n.get("running"),
                requests_waiting=n.get("waiting"),
                kv_cache_usage_frac=n.get("kv"),
                gpus=gpus.get(_host(t.instance), ()),
            )
        )
    return out


def _gpus_by_host(payload: Any) -> dict[str, tuple[GpuReading, ...]]:
    """dcgm-exporter readings grouped by host: the `hostname` (or older `Hostname`) label, else
    the exporter's own instance host."""
    readings: dict[tuple[str, int], dict[str, Any]] = {}
    for r in result_of(payload, "vector"):
        m = r["metric"]
        field = DCGM_FIELDS.get(str(m.get(TAG, "")))
        if field is None:
            continue
        host = str(m.get("hostname") or m.get("Hostname") or _host(str(m.get("instance", ""))))
        try:
            index = int(str(m.get("gpu", "0")))
        except ValueError:
            continue
        value = r.get("value")
        v = sample_value(value[1]) if isinstance(value, list) and len(value) == 2 else None
        d = readings.setdefault((host, index), {"name": m.get("modelName"), "uuid": m.get("UUID")})
        d[field] = v
    out: dict[str, list[GpuReading]] = {}
    for (host, index), d in sorted(readings.items()):
        used, free = d.get("fb_used_mib"), d.get("fb_free_mib")
        total = used + free if used is not None and free is not None else None
        out.setdefault(host, []).append(
            GpuReading(
                index=index,
                name=str(d["name"]) if d.get("name") else None,
                uuid=str(d["uuid"]) if d.get("uuid") else None,
                temperature_c=d.get("temperature_c"),
                memory_used_bytes=int(used * 1024 * 1024) if used is not None else None,
                memory_total_bytes=int(total * 1024 * 1024) if total is not None else None,
                utilization_pct=d.get("utilization_pct"),
                power_w=d.get("power_w"),
                sm_clock_mhz=d.get("sm_clock_mhz"),
                memory_clock_mhz=d.get("memory_clock_mhz"),
                host=host,
            )
        )
    return {h: tuple(g) for h, g in out.items()}


def fleet_history(payload: Any, end_wall: float, step_s: float) -> list[FleetHistory]:
    """Per-target history from a tagged range answer; `ago_s` = `end_wall` minus the sample time."""
    series: dict[Key, dict[str, dict[float, float | None]]] = {}
    for r in result_of(payload, "matrix"):
        m = r["metric"]
        key = (str(m.get("instance", "")), str(m.get("job", "")))
        tag = str(m.get(TAG, ""))
        values = r.get("values")
        if not isinstance(values, list):
            continue
        col = series.setdefault(key, {}).setdefault(tag, {})
        for pair in values:
            if isinstance(pair, list) and len(pair) == 2:
                ts = sample_value(pair[0])
                if ts is not None:
                    col[ts] = sample_value(pair[1])
    out = []
    for (instance, job), cols in series.items():
        times = sorted({ts for col in cols.values() for ts in col})
        out.append(
            FleetHistory(
                instance=instance,
                job=job,
                step_s=step_s,
                ago_s=tuple(max(0.0, end_wall - ts) for ts in times),
                generation_tok_s=tuple(cols.get("gen_rate", {}).get(ts) for ts in times),
                accepted_per_s=tuple(cols.get("acc_rate", {}).get(ts) for ts in times),
                drafts_per_s=tuple(cols.get("drafts_rate", {}).get(ts) for ts in times),
                requests_running=tuple(cols.get("running", {}).get(ts) for ts in times),
                kv_cache_usage_frac=tuple(cols.get("kv", {}).get(ts) for ts in times),
            )
        )
    return out
