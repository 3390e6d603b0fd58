"""The Textual app: `specmon chat` (and later `demo` and `watch` on a TTY).

Modules: `app` (SpecmonApp), `screens` (chat, settings, help), `widgets`, `messages`,
`session_port` (the only module that talks to the runtime), and pure helpers without textual
(`safe_text`, `blocks`, `conversation`). Import `specmon.ui.app.app` only where textual may load.
"""
