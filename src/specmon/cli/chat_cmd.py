"""`specmon chat`: chat with a vLLM server and watch its speculation live.

    specmon chat --attach URL [--model NAME]             a running server
    specmon chat --model M [--draft D] [--method ...] [--n-spec K] [--preset NAME] [--dry-run]
                 [-- extra vllm serve args]              host mode: specmon starts `vllm serve`
    specmon chat --resume [ID] | --export-chat ID FILE   saved conversations (docs/chat.md)

Opens the Textual app: a multi-turn conversation streamed from the server's OpenAI-compatible API,
with each answer's numbers under it. Keys: Enter sends, up/down walk the prompt history, Esc
cancels an answer (the partial text is kept), F2 changes temperature / top-p / max tokens, ctrl+r
retries the connection, ctrl+q quits. Conversations are saved (unless --no-save) under
$XDG_DATA_HOME/specmon/chats.sqlite; ctrl+s exports one as Markdown, ctrl+y / ctrl+b copy the last
answer / code block, ctrl+up takes back the last turn to edit, ctrl+o edits the system prompt,
ctrl+t switches among the server's models. A simulated server is labelled SIMULATED on screen.

Host mode (no --attach) starts vLLM exactly as `specmon serve` does (same checks, same command,
same --dry-run), shows its startup progress and log until /health answers 200, then the chat;
ctrl+l shows the server's log. Quitting, Ctrl-C, SIGTERM or SIGHUP stop its whole process group.

Exit status: 0 on quit (ctrl+q; 0 after --dry-run); 1 when the hosted server failed to start or
died (its last 50 log lines and the likely cause are shown); 2 for bad arguments or a failed
pre-launch check; 130 after Ctrl-C (SIGINT, or the key in the app), 143 after SIGTERM, 129 after
SIGHUP.

Defaults you set once: [chat] attach (used when neither --attach nor a host-mode flag such as
--preset or --draft is given; --model then picks the model on that server) and [app] theme in
$XDG_CONFIG_HOME/specmon/config.toml (or the file $SPECMON_CONFIG names); a flag beats the file,
`specmon config` shows what applies (docs/app.md, "Configuration").
"""

from __future__ import annotations

import argparse
from typing import Any

from specmon.cli.args import (
    PlanError,
    add_api_key_argument,
    add_command,
    add_gpu_argument,
    api_key_of,
    fail,
    positive_int,
    server_url,
    temperature,
    top_p,
)
from specmon.cli.chat_history_args import add_history_arguments, history_flags
from specmon.cli.export_args import add_export_argument
from specmon.cli.host_args import add_host_arguments
from specmon.cli.session_setup import add_redact_argument, add_theme_argument, gpu_choice
from specmon.cli.stream_args import add_stream_args, stream_limits_from
from specmon.runtime.host_plan import HostFlags
from specmon.ui.chat_run import ChatPlan

NAME = "chat"
SUMMARY = "chat with a vLLM server and see its speculative decoding live"


def register(subparsers: Any) -> None:
    p = add_command(subparsers, NAME, SUMMARY, __doc__)
    p.add_argument(
        "--attach",
        type=server_url,
        default=None,
        metavar="URL",
        help="base URL of a running server (default: [chat] attach of the config file; without "
        "either, --model starts one: host mode)",
    )
    p.add_argument(
        "--metrics-url",
        type=server_url,
        default=None,
        metavar="URL",
        help="/metrics page when not at URL/metrics",
    )
    add_api_key_argument(p)
    p.add_argument(
        "--model",
        default=None,
        help="with --attach: the model to chat with (default: the first listed); without it: "
        "the model vLLM is started with (host mode)",
    )
    p.add_argument("--record", metavar="FILE", help="record the session (.gz compresses)")
    add_redact_argument(p)
    p.add_argument("--temperature", type=temperature, default=None, metavar="T")
    p.add_argument("--top-p", type=top_p, default=None, metavar="P")
    p.add_argument("--max-tokens", type=positive_int, default=None, metavar="N")
    p.add_argument("--system", default=None, metavar="TEXT", help="system prompt")
    add_gpu_argument(p, "local for a server on this machine, else none")
    add_theme_argument(p)
    add_export_argument(p)
    add_stream_args(p)
    add_host_arguments(p, model=False)
    add_history_arguments(p)


def plan_from(args: argparse.Namespace) -> ChatPlan:
    """The chat the arguments ask for; PlanError (one line, exit 2) for flags that do not go
    together (checked again once `--resume` has filled in the server)."""
    plan = ChatPlan(
        attach=args.attach,
        metrics_url=args.metrics_url,
        api_key=api_key_of(args),
        model=args.model,
        record=args.record,
        redact=tuple(args.redact),
        temperature=args.temperature,
        top_p=args.top_p,
        max_tokens=args.max_tokens,
        system=args.system,
        gpu=args.gpu,
        theme=args.theme,
        export=args.export,
        limits=stream_limits_from(args),
        host=HostFlags.of(args),
        history=history_flags(args),
    )
    if plan.history.resume is None and plan.history.export_chat is None:
        problem = _problem(plan)
        if problem is not None:
            raise PlanError(problem)
    return plan


def _problem(plan: ChatPlan) -> str | None:
    """Why the plan cannot chat (None: it can)."""
    if plan.attach is None:
        if not (plan.model or plan.host.preset):
            return (
                "give --attach URL (a running server) or --model MODEL (specmon starts vLLM; "
                "`specmon chat --help`)"
            )
        if plan.metrics_url:
            return "--metrics-url is for --attach; a hosted server's /metrics is known"
        return None
    given = plan.host.given()
    if given:
        return (
            f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} for host mode (specmon "
            "starts vLLM) and cannot be used with --attach"
        )
    return None


def run(plan: ChatPlan) -> int:
    if plan.history.export_chat is not None:
        from specmon.ui.chat_run import scrubbed
        from specmon.ui.saved_chats import export_chat

        return export_chat(plan.history.export_chat, scrubbed(plan))
    if plan.history.resume is not None:
        resumed = resumed_plan(plan)
        if isinstance(resumed, int):
            return resumed
        if resumed.resumed is None and plan.attach is None and not (plan.model or plan.host.preset):
            return 0  # Esc in the list, and no server given: nothing to chat with
        plan = resumed
        problem = _problem(plan)
        if problem is not None:
            return fail(NAME, problem)
    from specmon.ui.chat_run import run_chat

    if plan.attach is None:
        return run_chat(plan, plan.gpu if plan.gpu is not None else "local")
    return run_chat(plan, gpu_choice(plan.gpu, [plan.attach]))


def resumed_plan(plan: ChatPlan) -> ChatPlan | int:
    """The plan with the conversation `--resume` names or the user picks (the same plan when
    none is picked): its server when none is given, and the settings the user did not give;
    or the exit code after a one-line error."""
    from dataclasses import replace

    from specmon.cli.chat_history_args import saved_server
    from specmon.ui.saved_chats import pick_resumed

    loaded = pick_resumed(plan.history.resume or "")
    if loaded is None or isinstance(loaded, int):
        return plan if loaded is None else loaded
    changes: dict[str, Any] = {}
    if plan.attach is None and not (plan.model or plan.host.preset):
        server = saved_server(loaded)
        if isinstance(server, int):
            return server
        changes["attach"], changes["model"] = server
    saved = loaded.settings
    for name, value in (
        ("system", saved.system),
        ("temperature", saved.temperature),
        ("top_p", saved.top_p),
        ("max_tokens", saved.max_tokens),
    ):
        if getattr(plan, name) is None:
            changes[name] = value
    return replace(plan, resumed=loaded, **changes)
