"""The saved-conversations list (`specmon chat --resume`), tested in a small host app with Pilot:
the list, search as you type, Enter reopens, Esc leaves, a broken store is one line."""

from __future__ import annotations

from pathlib import Path

from tests.support.ui_fakes import screen_text
from tests.support.waiting import wait_for_app
from textual.app import App
from textual.widgets import DataTable

from specmon.core.chat_record import SavedConversation, SavedServer, SavedTurn
from specmon.sources.conversation_store import ConversationStore
from specmon.ui.screens.conversations import ConversationsApp, ConversationsScreen


class Host(App[None]):
    """Pushes the list and keeps what it was dismissed with."""

    def __init__(self, search) -> None:
        super().__init__()
        self.search = search
        self.results: list[int | None] = []

    def on_mount(self) -> None:
        self.push_screen(ConversationsScreen(self.search), self.results.append)


def store_with(path: Path, *prompts: str) -> list[int]:
    with ConversationStore(path) as store:
        return [
            store.save(
                SavedConversation((SavedTurn(p, "ok"),), SavedServer("http://h:1", f"model-{p}"))
            )
            for p in prompts
        ]


def searcher(path: Path):
    def search(text: str):
        with ConversationStore(path, create=False) as store:
            return store.search(text)

    return search


def rows(app: App[None]) -> int:
    return app.screen.query_one("#conversations-table", DataTable).row_count


async def test_lists_newest_first_and_enter_reopens_the_highlighted(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    ids = store_with(path, "alpha question", "beta question")
    app = Host(searcher(path))
    async with app.run_test(size=(120, 30)) as pilot:
        # the count and the table's rows are painted in separate frames: wait for both
        await wait_for_app(pilot, lambda: "2 conversations" in screen_text(app))
        await wait_for_app(pilot, lambda: "alpha question" in screen_text(app))
        text = screen_text(app)
        assert text.index("beta question") < text.index("alpha question")
        assert "model-alpha question" in text and "2 conversations" in text
        await pilot.press("down")
        await pilot.press("enter")
        await wait_for_app(pilot, lambda: bool(app.results))
    assert app.results == [ids[0]]


async def test_typing_filters_and_enter_takes_the_first_match(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    ids = store_with(path, "alpha question", "beta question", "gamma")
    app = Host(searcher(path))
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for_app(pilot, lambda: rows(app) == 3)
        await pilot.press(*"ALPHA")
        await wait_for_app(pilot, lambda: "1 conversation" in screen_text(app))
        assert rows(app) == 1 and "beta question" not in screen_text(app)
        await pilot.press("enter")
        await wait_for_app(pilot, lambda: bool(app.results))
    assert app.results == [ids[0]]


async def test_no_match_says_so_and_enter_does_nothing_then_escape_leaves(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    store_with(path, "alpha")
    app = Host(searcher(path))
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for_app(pilot, lambda: rows(app) == 1)
        await pilot.press(*"zzz")
        await wait_for_app(
            pilot, lambda: "no saved conversation contains 'zzz'" in screen_text(app)
        )
        await pilot.press("enter")
        await pilot.pause()
        assert app.results == []
        await pilot.press("escape")
        await wait_for_app(pilot, lambda: bool(app.results))
    assert app.results == [None]


async def test_a_broken_store_is_one_line_on_screen(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    path.write_bytes(b"not sqlite at all" * 100)
    app = Host(searcher(path))
    async with app.run_test(size=(160, 30)) as pilot:
        await wait_for_app(
            pilot, lambda: "cannot read the saved conversations:" in screen_text(app)
        )
        line = next(ln for ln in screen_text(app).splitlines() if "cannot read the saved" in ln)
        assert "not a database" in line
        await pilot.press("escape")
        await wait_for_app(pilot, lambda: bool(app.results))
    assert app.results == [None]


async def test_the_app_form_exits_with_the_chosen_id(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    (cid,) = store_with(path, "only")
    app = ConversationsApp(searcher(path))
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for_app(pilot, lambda: rows(app) == 1)
        await pilot.press("enter")
        await pilot.pause()
    assert app.return_value == cid


async def test_titles_and_models_are_shown_literally(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    with ConversationStore(path) as store:
        store.save(
            SavedConversation(
                (SavedTurn("[bold]x[/bold] \x1b[2J", "ok"),),
                SavedServer("http://h:1", "[red]m\x1b]0;t\x07"),
            )
        )
    app = Host(searcher(path))
    async with app.run_test(size=(140, 30)) as pilot:
        await wait_for_app(pilot, lambda: "1 conversation" in screen_text(app))
        await wait_for_app(pilot, lambda: "[red]m" in screen_text(app))  # the row's own frame
        text = screen_text(app)
        assert "[bold]x[/bold] ␛[2J" in text
        assert "[red]m␛]0;t␇" in text
