"""``jsonltape search -i``: search as you type, in the terminal (prompt_toolkit).

A full-screen application: the query line at the top, the top hits below it, re-run on every
keystroke; Enter opens the selected hit's transcript window, Escape or q goes back. Searches
run in one worker thread on its own read-only connection to the index (a local SQLite file or a
PostgreSQL team index, through the same reader as ``jsonltape search``), so the screen never
waits for a query: a newer keystroke interrupts a running SQLite query (a progress handler; a
PostgreSQL query, bounded by its plans, runs out) and only the latest finished result is
drawn. Text from the index is data: nothing from it reaches the terminal raw. Message texts
lose whole terminal sequences (a tool's colours) and show other controls escaped; names (a
title, a path, an error naming one) show every control escaped, sequences too, so they stay
exact: a path drawn without its sequences would name a file that does not exist.

Only this module imports prompt_toolkit, and only ``search -i`` imports this module.
"""

from __future__ import annotations

import re
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from jsonltape_daemon.engines.sqlite import search as s
from jsonltape_daemon.search.language import as_typed
from jsonltape_daemon.search.reader import Reader, open_reader
from jsonltape_daemon.target import SqliteTarget, Target
from prompt_toolkit.application import Application
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.layout import (
    BufferControl,
    ConditionalContainer,
    FormattedTextControl,
    HSplit,
    Layout,
    Window,
)
from prompt_toolkit.layout.processors import BeforeInput
from prompt_toolkit.styles import Style

from .._display import shown
from .._time import format_ms
from ._base import CliError

__all__ = ["clean", "interactive_search"]

#: Messages shown around a hit: up to this many events after it, this many messages in all.
_AFTER_EVENTS = 30
_WINDOW_MESSAGES = 40
_STYLE = Style.from_dict(
    {
        "prompt": "bold",
        "status": "reverse",
        "mark": "bold fg:ansiyellow",
        "selected": "reverse",
        "meta": "fg:ansicyan",
        "hit": "bold",
        "help": "fg:ansibrightblack",
    }
)


def clean(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` safe to draw: whole terminal escape sequences (colours, titles) removed, tabs
    as spaces, the rest by the display rule everything else follows
    (:func:`~jsonltape._display.shown`: ``\x07``, ``\u202e``); line breaks kept only when
    asked, else turned into spaces."""
    text = text.replace("\t", "    ").replace("\r\n", "\n").replace("\r", "\n")
    if not keep_newlines:
        text = text.replace("\n", " ")
    return shown(text, newlines=True, sequences=True)


def _marked(snippet: str, style: str = "") -> StyleAndTextTuples:
    """A snippet's fragments, the MARK_OPEN/MARK_CLOSE spans styled as matches."""
    out: StyleAndTextTuples = []
    inside = False
    for part in re.split(f"([{s.MARK_OPEN}{s.MARK_CLOSE}])", snippet):
        if part in (s.MARK_OPEN, s.MARK_CLOSE):
            inside = part == s.MARK_OPEN
        elif part:
            out.append((f"{style} class:mark" if inside else style, clean(part)))
    return out


class _Worker(threading.Thread):
    """Runs the latest job on its own read-only connection; an older job still running is
    interrupted when a newer one is submitted, and its result is never delivered."""

    def __init__(self, target: Target, deliver: Callable[[int, object], None]) -> None:
        super().__init__(name="jsonltape-search", daemon=True)
        self._target = target
        self._deliver = deliver
        self._cv = threading.Condition()
        self._job: tuple[int, Callable[[Reader], object]] | None = None
        self._gen = 0
        self._quit = False

    def submit(self, job: Callable[[Reader], object]) -> int:
        with self._cv:
            self._gen += 1
            self._job = (self._gen, job)
            self._cv.notify()
            return self._gen

    def stop(self) -> None:
        with self._cv:
            self._quit = True
            self._gen += 1
            self._cv.notify()

    def _stale(self, gen: int) -> bool:
        return gen != self._gen or self._quit

    def run(self) -> None:
        try:
            index = open_reader(self._target)
        except Exception as exc:  # the index went away since start-up: say so, do not crash
            self._deliver(0, exc)
            return
        try:
            while True:
                with self._cv:
                    while self._job is None and not self._quit:
                        self._cv.wait()
                    if self._quit:
                        return
                    assert self._job is not None
                    gen, job = self._job
                    self._job = None
                con = getattr(index, "con", None)
                if isinstance(con, sqlite3.Connection):
                    # A non-zero return aborts the statement: an obsolete query stops here.
                    con.set_progress_handler(lambda gen=gen: self._stale(gen), 2000)  # type: ignore[misc]
                try:
                    result: object = job(index)
                except Exception as exc:  # shown on the status line, never a traceback
                    if self._stale(gen):
                        continue
                    result = exc
                if not self._stale(gen):
                    self._deliver(gen, result)
        finally:
            index.close()


class _Found:
    """A finished search: its hits and how long it took."""

    def __init__(self, query: str, hits: list[s.Hit], ms: float) -> None:
        self.query, self.hits, self.ms = query, hits, ms


class _Transcript:
    """The messages around a hit, as drawable lines, and the line of the hit."""

    def __init__(self, hit: s.Hit, info: s.SessionInfo, turns: list[s.Turn]) -> None:
        self.lines: list[StyleAndTextTuples] = [
            [("class:hit", shown(f"{info.session}  {info.title or '(untitled)'}"))],
            [("class:meta", shown(f"{info.path}  ·  {info.events} events  ·  {info.state}"))],
        ]
        self.hit_line = 0
        for t in turns:
            self.lines.append([])
            here = t.seq == hit.seq
            if here:
                self.hit_line = len(self.lines)
            status = "" if t.status == "current" else f" [{t.status}]"
            cut = " [truncated]" if t.truncated else ""
            head = f"{'▶ ' if here else ''}#{t.seq}  {format_ms(t.time, utc=False)}  {t.role}"
            self.lines.append([("class:hit" if here else "class:meta", clean(head + status + cut))])
            for line in clean(t.text or "(no text)", keep_newlines=True).split("\n"):
                self.lines.append([("", "    " + line)])


def _open_hit(hit: s.Hit) -> Callable[[Reader], object]:
    def job(index: Reader) -> object:
        origin = getattr(hit, "origin", None)  # a team index: paths repeat across machines
        origins = (origin,) if isinstance(origin, str) else ()
        found = index.resolve(hit.path, origins=origins) or index.resolve(
            hit.session, origins=origins
        )
        if not found:
            raise LookupError(f"{hit.session}: no longer in the index")
        key, info = found[0]
        win = index.window(key, last=_WINDOW_MESSAGES, before=hit.seq + 1 + _AFTER_EVENTS)
        return _Transcript(hit, info, win.messages)

    return job


class _App:
    """The screens (results, transcript), their state and key bindings."""

    def __init__(
        self,
        target: Target,
        query: str,
        phrases: Sequence[str],
        filters: s.Filters,
        limit: int,
        notes: list[str],
        origins: Sequence[str] = (),
    ) -> None:
        self.phrases, self.filters, self.limit = tuple(phrases), filters, limit
        self.origins = tuple(origins)
        self.found: _Found | None = None
        self.selected = 0
        self.status = ""  # the last error, until the next result
        self.notes = "".join(f" · warning: {note}" for note in notes)
        self.transcript: _Transcript | None = None
        self.tline = 0
        self.started = 0.0
        self.worker = _Worker(target, self._deliver)
        self.buffer = Buffer(multiline=False, on_text_changed=lambda _b: self._query_changed())
        self.buffer.text = query
        self.buffer.cursor_position = len(query)
        on_results = Condition(lambda: self.transcript is None)
        on_transcript = Condition(lambda: self.transcript is not None)
        self.results_window = Window(
            FormattedTextControl(self._results_text, focusable=False), wrap_lines=False
        )
        self.transcript_window = Window(
            FormattedTextControl(self._transcript_text, focusable=True), wrap_lines=False
        )
        self.query_window = Window(
            BufferControl(self.buffer, input_processors=[BeforeInput("search: ", "class:prompt")]),
            height=1,
        )
        body = HSplit(
            [
                self.query_window,
                Window(FormattedTextControl(self._status_text), height=1, style="class:status"),
                ConditionalContainer(self.results_window, on_results),
                ConditionalContainer(self.transcript_window, on_transcript),
                Window(FormattedTextControl(self._help_text), height=1, style="class:help"),
            ]
        )
        self.app: Application[None] = Application(
            layout=Layout(body, focused_element=self.query_window),
            key_bindings=self._bindings(on_results, on_transcript),
            style=_STYLE,
            full_screen=True,
            mouse_support=False,
        )
        self.app.ttimeoutlen = 0.05  # a lone Escape acts at once (sequences arrive together)

    # -- searching -------------------------------------------------------------------------

    def _query_changed(self) -> None:
        text = self.buffer.text
        if not s.parse_query(text) and not any(p.strip() for p in self.phrases):
            self.worker.submit(lambda _index: _Found(text, [], 0.0))
            return
        phrases, filters, limit, origins = self.phrases, self.filters, self.limit, self.origins

        def job(index: Reader) -> object:
            t0 = time.perf_counter()
            # The word being typed is a prefix: substrings are found only inside identifiers
            # (daemon/jsonltape_daemon/text/idents.py), so "quok" alone would not find "quokka".
            typed = as_typed(text)
            hits = index.search(typed, filters, limit, phrases=phrases, origins=origins)
            return _Found(text, hits, (time.perf_counter() - t0) * 1000)

        self.started = time.perf_counter()
        self.worker.submit(job)

    def _deliver(self, _gen: int, result: object) -> None:
        loop = self.app.loop
        if loop is not None:  # applied on the UI thread, between two redraws
            loop.call_soon_threadsafe(self._apply, result)

    def _apply(self, result: object) -> None:
        if isinstance(result, _Found):
            self.found, self.selected = result, 0
            self.status = ""
        elif isinstance(result, _Transcript):
            self.transcript, self.tline = result, result.hit_line
            self.app.layout.focus(self.transcript_window)
        elif isinstance(result, Exception):
            self.status = shown(f"error: {result}")
        self.app.invalidate()

    # -- drawing ---------------------------------------------------------------------------

    def _status_text(self) -> StyleAndTextTuples:
        if self.status:
            return [("", " " + self.status)]
        if self.found is None or not self.found.query.strip():
            return [("", " type to search" + self.notes)]
        n = len(self.found.hits)
        more = "+" if n >= self.limit else ""
        took = f" · {self.found.ms:.1f} ms"
        return [("", f" {n}{more} hit{'' if n == 1 else 's'}{took}{self.notes}")]

    def _results_text(self) -> StyleAndTextTuples:
        hits = self.found.hits if self.found else []
        if self.found and self.found.query.strip() and not hits:
            return [("", "no matches")]
        out: StyleAndTextTuples = []
        for i, hit in enumerate(hits):
            style = "class:selected" if i == self.selected else ""
            if i == self.selected:
                out.append(("[SetCursorPosition]", ""))
            status = "" if hit.status == "current" else f" ({hit.status})"
            title = f"  {hit.title}" if hit.title else ""
            when = format_ms(hit.time, utc=False, seconds=False)
            head = shown(f"{hit.session[:12]}  {when}  {hit.role}{status}{title}")
            out += [(f"{style} class:meta", head), ("", "\n"), (style, "    ")]
            out += _marked(hit.snippet, style)
            out.append(("", "\n"))
        return out

    def _transcript_text(self) -> StyleAndTextTuples:
        if self.transcript is None:
            return []
        out: StyleAndTextTuples = []
        for i, line in enumerate(self.transcript.lines):
            if i == self.tline:
                out.append(("[SetCursorPosition]", ""))
            out += line
            out.append(("", "\n"))
        return out

    def _help_text(self) -> StyleAndTextTuples:
        if self.transcript is not None:
            return [("", " ↑/↓ PgUp/PgDn scroll · Esc/q back to the results · Ctrl-C quit")]
        return [("", " ↑/↓ select · Enter open the transcript · Esc/Ctrl-C quit")]

    # -- keys ------------------------------------------------------------------------------

    def _bindings(self, on_results: Condition, on_transcript: Condition) -> KeyBindings:
        kb = KeyBindings()

        @kb.add("c-c", eager=True)
        def _quit(event: KeyPressEvent) -> None:
            event.app.exit()

        @kb.add("escape", filter=on_results, eager=True)
        def _quit_results(event: KeyPressEvent) -> None:
            event.app.exit()

        def move(delta: int) -> Callable[[KeyPressEvent], None]:
            def handler(_event: KeyPressEvent) -> None:
                n = len(self.found.hits) if self.found else 0
                self.selected = max(0, min(n - 1, self.selected + delta))

            return handler

        for key, delta in (("up", -1), ("down", 1), ("pageup", -10), ("pagedown", 10)):
            kb.add(key, filter=on_results)(move(delta))

        @kb.add("enter", filter=on_results)
        def _open(_event: KeyPressEvent) -> None:
            if self.found and 0 <= self.selected < len(self.found.hits):
                self.worker.submit(_open_hit(self.found.hits[self.selected]))

        @kb.add("escape", filter=on_transcript, eager=True)
        @kb.add("q", filter=on_transcript)
        def _back(event: KeyPressEvent) -> None:
            self.transcript = None
            event.app.layout.focus(self.query_window)

        def scroll(delta: int) -> Callable[[KeyPressEvent], None]:
            def handler(_event: KeyPressEvent) -> None:
                if self.transcript is not None:
                    last = len(self.transcript.lines) - 1
                    self.tline = max(0, min(last, self.tline + delta))

            return handler

        for key, delta in (("up", -1), ("down", 1), ("pageup", -20), ("pagedown", 20)):
            kb.add(key, filter=on_transcript)(scroll(delta))
        return kb

    def run(self) -> None:
        self.worker.start()
        try:
            self.app.run(pre_run=self._query_changed)
        finally:
            self.worker.stop()
            self.worker.join(timeout=2)


def interactive_search(
    index: Target | Path,
    query: str,
    phrases: Sequence[str],
    filters: s.Filters,
    limit: int,
    origins: Sequence[str] = (),
) -> None:
    """Run the interactive search of a local or team index until the user quits (Ctrl-C, or
    Escape on the results)."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise CliError("search -i needs a terminal: stdin and stdout must be a tty", 2)
    target = SqliteTarget(index) if isinstance(index, Path) else index
    first = open_reader(target)  # a missing or unreachable index is reported before the screen
    try:
        notes = first.notes()
    finally:
        first.close()
    _App(target, query, phrases, filters, limit, notes, origins).run()
