"""`specmon web`'s server: the Textual app in a browser, one app process per tab (docs/web.md).

    plan.py    WebPlan (what to serve, where) and the secrets kept off the apps' command lines
    net.py     the listening address: the address to print, the socket
    auth.py    the token, exchanged for a cookie, checked before anything is served
    limits.py  what a connection may cost before it shows the token: idle timeout, caps by
               address and in all, a rate-limited log
    server.py  textual-serve's server with each app in its own process group, a bounded stop
    page/      the page template (shipped in the wheel with the package)

A layer beside ui and bench: it may import runtime, sources and core, never cli or ui (the
cli's `web` command builds the WebPlan with argparse and calls `server.start`).
"""
