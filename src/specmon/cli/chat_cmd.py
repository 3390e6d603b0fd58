"""`specmon chat --attach URL`: chat with a running vLLM server and watch its speculation live.

Opens the Textual app: a multi-turn conversation streamed from the server's OpenAI-compatible API,
with each answer's numbers under it. Keys: Enter sends, up/down walk the prompt history, Esc
cancels an answer (the partial text is kept), F2 changes temperature / top-p / max tokens, ctrl+r
retries the connection, ctrl+q quits. A simulated server is labelled SIMULATED on screen.

Exit status: 0 on quit; 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from specmon.cli.session_setup import add_theme_argument

if TYPE_CHECKING:
    from specmon.runtime.session import LiveSession


def _temperature(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= value <= 100.0 or math.isnan(value):
        raise argparse.ArgumentTypeError(f"must be from 0 to 100, got {text!r}")
    return value


def _top_p(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be above 0 and at most 1, got {text!r}")
    return value


def _max_tokens(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text!r}")
    return value


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "chat",
        help="chat with a vLLM server and see its speculative decoding live",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--attach", required=True, metavar="URL", help="server base URL")
    p.add_argument(
        "--metrics-url", default=None, metavar="URL", help="/metrics page when not at URL/metrics"
    )
    p.add_argument(
        "--api-key",
        default=None,
        help="API key (default: $OPENAI_API_KEY or $VLLM_API_KEY); never shown or recorded",
    )
    p.add_argument("--model", default=None, help="model to chat with (default: the first listed)")
    p.add_argument("--record", metavar="FILE", help="record the session (.gz compresses)")
    p.add_argument("--temperature", type=_temperature, default=None, metavar="T")
    p.add_argument("--top-p", type=_top_p, default=None, metavar="P")
    p.add_argument("--max-tokens", type=_max_tokens, default=None, metavar="N")
    p.add_argument("--system", default=None, metavar="TEXT", help="system prompt")
    p.add_argument(
        "--gpu",
        default=None,
        metavar="local|none|DCGM_URL",
        help="GPU numbers from local NVML, a dcgm-exporter URL, or none (default: local for a "
        "server on this machine, else none)",
    )
    add_theme_argument(p)


def _error(message: str) -> int:
    print(f"specmon chat: {message}", file=sys.stderr)
    return 2


def _check_url(url: str, flag: str) -> str | None:
    """A quick check of a server URL (the full one runs when connecting); None if fine."""
    text = url.strip()
    parts = urlsplit(text if "://" in text else "http://" + text)
    if parts.scheme not in ("http", "https"):
        return f"{flag} must be an http or https URL, got {url!r}"
    try:
        _ = parts.port
    except ValueError:
        return f"{flag} has a bad port: {url!r}"
    if not parts.hostname:
        return f"{flag} has no host: {url!r}"
    return None


def run(args: argparse.Namespace) -> int:
    # Only Textual is imported before the first paint; the runtime and the OpenAI client load in
    # the app's connect worker (make_monitor below), so the screen shows at once.
    from specmon.cli.app_runner import run_app
    from specmon.cli.session_setup import default_gpu_source
    from specmon.ui.app.app import SpecmonApp
    from specmon.ui.app.conversation import ChatSettings
    from specmon.ui.app.session_port import SessionPort

    for url, flag in ((args.attach, "--attach"), (args.metrics_url, "--metrics-url")):
        problem = _check_url(url, flag) if url else None
        if problem:
            return _error(problem)
    gpu = args.gpu if args.gpu is not None else default_gpu_source([args.attach])
    if gpu not in ("local", "none") and not gpu.startswith(("http://", "https://")):
        return _error(f"--gpu must be local, none or a dcgm-exporter http(s) URL, got {gpu!r}")

    def make_session() -> LiveSession:
        # The collector (hub, stream client, scrapers, recorder) runs in its own process, so
        # the app's rendering cannot delay arrival timestamps (docs/architecture.md).
        from specmon.cli.session_setup import state_factory
        from specmon.runtime.monitor import pair_targets
        from specmon.runtime.session import CollectorProcess, SessionConfig

        targets = pair_targets([args.attach], [args.metrics_url] if args.metrics_url else [])
        config = SessionConfig(
            tuple(targets), api_key=args.api_key, gpu=gpu, record=args.record, quiet=True
        )
        return CollectorProcess(config, state_factory(None))

    port = SessionPort(make_session, api_key=args.api_key, model=args.model)
    settings = ChatSettings(args.temperature, args.top_p, args.max_tokens)
    app = SpecmonApp(port, settings=settings, system=args.system, theme=args.theme)
    return run_app(app, port)
