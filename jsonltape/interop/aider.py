"""Aider chat histories (``.aider.chat.history.md`` in a repository's root) to jsonltape.

The file is Markdown that Aider appends to (Aider-AI/aider ``aider/io.py`` at commit
5dc9490bb35f9729ef2c95d00a19ccd30c26339c: ``append_chat_history``, ``user_input``,
``ai_output``, ``tool_output``): each run of ``aider`` starts with ``# aider chat started at
YYYY-MM-DD HH:MM:SS`` (local time), the user's input is written as ``#### `` lines, what Aider
itself prints (its command line, announcements, edits applied, errors, the ``Tokens: … Cost: …``
report) as ``> `` lines, and the model's reply as plain lines, once it is complete. It has no
ids, no structured tool calls and no other times. Each line is a record ``{"text": line}``
(``_inputs.TextInput``): an import keeps every line verbatim (the lines of a reply or of a
block of Aider's output as one run, ``_raw``), so the file is rebuilt byte for byte.

Mapping, as Aider's own reader (``utils.split_chat_history_markdown``, used to restore a chat)
reads the lines: **each run is a session** (the lines before the file's first run header, when
there are any, a session of their own); the run header gives every event of the run its time
(read as this machine's local time) and the session's creation time. Consecutive ``#### ``
lines are one ``user/message`` (the prefix and the two-space line break removed) starting a turn;
a ``/command`` is an instruction to Aider, kept raw, except ``/ask``, ``/code``, ``/architect``
and ``/context`` with a message (the message is the prompt); an answer to a confirmation
(``(Y)es/(N)o … [Yes]: y``) and an empty submit (``<blank>``) are kept raw too. Plain lines are
one ``assistant/message`` until the next ``#### ``, ``> `` or run header line (blank lines
inside it are its paragraphs); reasoning Aider streamed between its ``thinking-content-…`` tags
(or a model's ``<think>`` tags) at the start of a reply is a reasoning part. ``> `` lines (and
lines that continue one without a blank line between, such as a repository map Aider printed)
are kept raw; from them the ``Model:`` / ``Models:`` / ``Main model:`` announcement sets the
model, ``Aider v…`` the agent's version, and the ``Tokens:`` report (with its ``Cost:``) is the
usage of the reply before it (Aider's rounded numbers: ``sent`` less the cache hits and writes
→ ``input_tokens``, ``cache write`` → ``cache_creation_input_tokens``, ``cache hit`` /
``cached`` → ``cache_read_input_tokens``, ``received`` → ``output_tokens``, the message's cost
→ ``cost``). Aider never marks the end of a turn: the next prompt or a finished source ends it.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from pathlib import Path
from typing import Any

from ..errors import FormatError
from ._agent import Agent
from ._base import Group, Mapper, Out, safe_id
from ._inputs import Input, TextInput
from ._parts import reasoning_part, text_part
from ._raw import run_of, runs

__all__ = ["AGENTS", "NAME", "AiderMapper", "history"]

#: The file Aider writes in a repository's root (``--chat-history-file`` changes it).
NAME = ".aider.chat.history.md"
_HEADER = re.compile(r"^# aider chat started at (\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)\s*$")
#: The tags Aider streams reasoning between (aider/reasoning_tags.py), and the common one
#: models write themselves; only at the start of a reply.
_THINK = re.compile(
    r"\A\s*<(thinking-content-7bbeb8e1441453ad999a0bbba8a46d4b|think)>(.*?)</\1>\s*", re.S
)
_MODEL = re.compile(r"^(?:Main model|Model|Models): (\S+)")
_VERSION = re.compile(r"^Aider v(\S+)")
_TOKENS = re.compile(r"^Tokens: (.+ received)\.")
_COUNT = re.compile(
    r"^([0-9][0-9,]*(?:\.[0-9]+)?)(k?) (sent|received|cache write|cache hit|cached)$"
)
_COST = re.compile(r"Cost: \$([0-9][0-9,]*(?:\.[0-9]+)?) (?:message|request)\b")
#: Commands whose text is a message to the model (Aider's cmd_ask, cmd_code, ...).
_SWITCH = re.compile(r"\A/(ask|code|architect|context)\s+(\S.*)\Z", re.S)
_CONFIRM = re.compile(r"\(Y\)es/\(N\)o.*\]: ?\S*\Z")
_BLANK = "<blank>"
#: What a line starts with when :meth:`AiderMapper.handle` may read it as more than a reply's
#: line (a run header, a prompt, Aider's output); any other line, blank or not, continues an
#: open reply.
_NOT_REPLY = ("#", ">")
#: How the lines of Aider's output that :meth:`AiderMapper._tool` reads for more begin (once
#: stripped; a superset of what ``_MODEL``, ``_VERSION`` and the usage reports match).
_READ_FOR_MORE = ("Main model", "Model", "Aider v", "Tokens: ", "Cost: $")
#: A line of white space alone (a reply's blank line), one line at a time.
_SPACE_ONLY = re.compile(r"^[^\S\n]+$", re.M)
#: How far into a file a run header is looked for before it is refused as not a history.
_SNIFF = 1 << 16


def _stamp(m: re.Match[str]) -> str:
    return "".join(m.groups()[:3]) + "T" + "".join(m.groups()[3:])


def _local_ms(m: re.Match[str]) -> int:
    y, mo, d, h, mi, s = (int(g) for g in m.groups())
    return int(time.mktime((y, mo, d, h, mi, s, 0, 0, -1)) * 1000)


def _number(text: str, k: str) -> int:
    value = float(text.replace(",", ""))
    return round(value * 1000) if k else round(value)


def usage_of(report: str) -> dict[str, Any] | None:
    """The usage of Aider's ``Tokens: … received. Cost: $… message, …`` report."""
    found = _TOKENS.match(report)
    if found is None:
        return None
    counts: dict[str, int] = {}
    for piece in found.group(1).split(", "):
        m = _COUNT.match(piece.strip())
        if m is None:
            return None
        counts[m.group(3)] = _number(m.group(1), m.group(2))
    write = counts.get("cache write", 0)
    hit = counts.get("cache hit", counts.get("cached", 0))
    usage: dict[str, Any] = {"input_tokens": max(counts.get("sent", 0) - write - hit, 0)}
    if write:
        usage["cache_creation_input_tokens"] = write
    if hit:
        usage["cache_read_input_tokens"] = hit
    usage["output_tokens"] = counts.get("received", 0)
    cost = _COST.search(report)
    if cost is not None:
        usage["cost"] = float(cost.group(1).replace(",", ""))
    return usage


def _unended(raw: str) -> str:
    """A line without the ``\r`` Aider on Windows writes before its newline."""
    return raw[:-1] if raw.endswith("\r") else raw


def _unquoted(line: str) -> str:
    """What Aider printed on a ``>`` line (the quote and its space taken off)."""
    return line[2:] if line.startswith("> ") else line[1:]


def _reply_lines(raw: str) -> str:
    r"""A reply's lines (joined with ``\n``) as its text holds them: each without Windows'
    ``\r``, empty if blank (as ``str.strip`` sees it: ``\s`` is the same Unicode class)."""
    return _SPACE_ONLY.sub("", (raw + "\n").replace("\r\n", "\n"))[:-1]


def reply_parts(text: str) -> list[dict[str, Any]]:
    """A reply's parts: the reasoning streamed at its start, then its text."""
    parts: list[dict[str, Any]] = []
    m = _THINK.match(text)
    if m is not None:
        if m.group(2).strip():
            parts.append(reasoning_part(m.group(2).strip()))
        text = text[m.end() :]
    if text.strip():
        parts.append(text_part(text.strip("\n")))
    return parts


class _Block:
    """Lines of one kind (``user`` or ``tool``) waiting to become one event."""

    def __init__(self, kind: str, first: int) -> None:
        self.kind = kind
        self.first = first
        self.lines: list[int] = []
        self.raw: dict[str, str] = {}
        self.texts: list[str] = []


class AiderMapper(Mapper):
    source = "aider"
    implicit_end = True
    known_raw = frozenset({"run", "tool", "command", "blank"})
    nested = False  # its data is built of the history's lines: strings, a few levels deep

    def __init__(self, name: str, path: str, session_id: str) -> None:
        super().__init__(name, path)
        self.digest = name.rpartition("#")[2].split("-", 1)[0]
        self.cwd = str(Path(path).absolute().parent)
        self.run = self._new_run("", session_id)
        self.runs = 0
        self.used: dict[str, int] = {}  # session id -> times given
        self.block: _Block | None = None
        self.text: list[str] = []  # the reply being read (its lines)
        self.reply: Group | None = None  # the run's latest reply (for its usage)
        self.kind = "blank"  # of the last line that was not blank
        self.after_blank = True
        self.model: str | None = None
        #: lines before the first run header (the file starts in the middle of a run)
        self.orphan = False

    def _new_run(self, name: str, sid: str) -> Out:
        out = self.new_out(name, sid, {})
        out.target.agent = "aider"
        out.target.cwd = self.cwd
        return out

    def main_out(self) -> Out:
        return self.run

    def sniff(self, value: dict[str, Any]) -> str | None:
        return None  # the reader refused a file that is not a history (see history())

    # -- lines ------------------------------------------------------------------------------

    def handle(self, v: dict[str, Any]) -> None:
        line = _unended(v["text"])
        first = line[:1]  # most lines are a reply's: one test of their first character
        if first == "#" and (header := _HEADER.match(line)) is not None:
            self._header(header)
        elif first == "#" and (line.startswith("#### ") or line == "####"):
            self._line("user", line[5:])
        elif first == ">":
            self._tool(_unquoted(line))
        elif not line.strip():
            self._blank()
            return
        elif self.kind in ("tool", "usage") and not self.after_blank:
            self._tool(line)  # a multi-line message Aider printed: only its first line is quoted
        else:
            self._reply(line)
        self.after_blank = False
        if not self.runs:
            self.orphan = True

    def follow(self, texts: list[str], start: int, end: int, n: int) -> int:
        """The lines that continue the open reply, or the open block of Aider's output, taken
        at once: a reply of a hundred lines is one event, and feeding its lines one by one was
        most of an import's time. Each is what :meth:`handle` makes of it there."""
        if self.block is not None:
            return self._more_output(texts, start, end, n) if self.kind == "tool" else 0
        g = self.reply
        if g is None or self.run.group is not g or not self.text or self.kind != "text":
            return 0
        j = start
        while j < end - 1 and not texts[j].startswith(_NOT_REPLY):  # the last is fed as usual
            j += 1
        if j == start:
            return 0
        taken = texts[start:j]
        g.lines.extend(range(n, n + len(taken)))
        key, joined = run_of(n, taken)
        g.raw[key] = joined
        # the lines as one piece of the reply's text (its lines are joined with "\n" too)
        self.text.append(_reply_lines(joined))
        self.after_blank = not taken[-1].strip()
        return len(taken)

    def _more_output(self, texts: list[str], start: int, end: int, n: int) -> int:
        """More of the open block of Aider's output: ``>`` lines (their text without the
        quote) and blank ones (empty), up to a line that is anything else or that
        :meth:`_tool` reads for more (a model, a version, a usage report)."""
        block = self.block
        assert block is not None
        got: list[str] = []
        blank = False
        for j in range(start, end - 1):  # the stretch's last line is fed as usual
            line = _unended(texts[j])
            if line.startswith(">"):
                text = _unquoted(line)
                if text.strip().startswith(_READ_FOR_MORE):
                    break
                got.append(text)
                blank = False
            elif not line.strip():
                got.append("")
                blank = True
            else:
                break
        if not got:
            return 0
        block.lines.extend(range(n, n + len(got)))
        key, joined = run_of(n, texts[start : start + len(got)])
        block.raw[key] = joined
        block.texts.extend(got)
        self.after_blank = blank
        return len(got)

    def _blank(self) -> None:
        self.after_blank = True
        if self.block is not None:
            self._add(self.block, "")
        elif self.text:
            self._reply("")
        else:  # nothing to attach it to
            self.raw_line("blank", known=True)

    def _header(self, m: re.Match[str]) -> None:
        self._finish()
        self.flush_group(self.run)
        if self.runs or self.orphan:  # the run before has ended (Aider exited)
            self.time = self.run.last_time or self.time
            self.close_open(self.run, "run")
        self.time = _local_ms(m)
        if self.runs or self.orphan:
            base = safe_id(f"{self.digest}-{_stamp(m)}", "aider-")
            n = self.used.get(base, 0) + 1
            self.used[base] = n
            sid = base if n == 1 else safe_id(f"{base}-{n}")
            self.run = self._new_run(f"run-{self.runs + 1}", sid)
        self.runs += 1
        self.reply = None
        target = self.run.target
        target.created = self.time
        target.meta["import"] = {"run": _stamp(m)}
        self.kind = "header"
        self.raw_line("run", known=True)

    def _line(self, kind: str, text: str) -> None:
        if self.block is None or self.block.kind != kind or (kind == "user" and self.after_blank):
            self._finish()
            self.block = _Block(kind, self.n)
        self._add(self.block, text)
        self.kind = kind

    def _add(self, block: _Block, text: str) -> None:
        block.lines.append(self.n)
        raw = self.claim()
        if raw is not None:
            block.raw[str(self.n)] = raw
        block.texts.append(text)

    def _tool(self, text: str) -> None:
        stripped = text.strip()
        found = _MODEL.match(stripped)
        if found is not None:
            self.model = found.group(1)
            self.set_request(self.run, model=self.model)
        found = _VERSION.match(stripped)
        if found is not None and self.run.target.header is self.run.target:
            self.run.target.agent = f"aider/{found.group(1)}"
        usage = usage_of(stripped) if stripped.startswith("Tokens: ") else None
        if usage is not None and self._usage(usage):
            self.kind = "tool"
            return
        if stripped.startswith("Cost: $") and self.kind == "usage":
            self._usage_more(stripped)
            return
        self._line("tool", text)

    def _reply(self, text: str) -> None:
        if self.block is not None:
            self._finish()
        out = self.run
        if out.group is None or out.group is not self.reply or not self.text:
            if out.turn is None:
                self.start_turn(out)
            self.reply = self.group_for(out, f"aider-{self.n}")
            self.reply.model = self.model
            self.text = []
        self.add_line(self.reply)
        self.text.append(text)
        self.kind = "text"

    def flush_group(self, out: Out, *, keep: bool = False) -> None:
        g = out.group
        if g is not None and g is self.reply and self.text:
            g.parts = reply_parts("\n".join(self.text))
            if not keep:
                self.text = []
        super().flush_group(out, keep=keep)

    def _usage(self, usage: dict[str, Any]) -> bool:
        """The report of the run's latest reply: it revises the reply to carry it."""
        g = self.reply
        out = self.run
        if g is None or g.usage is not None:
            return False
        self._finish()
        self.flush_group(out)
        if g.vid is None or not out.surface.is_current(g.vid):
            return False
        out.group = g
        self.add_line(g)
        g.usage = usage
        self.flush_group(out)
        self.kind = "usage"
        return True

    def _usage_more(self, line: str) -> None:
        """A ``Cost:`` line Aider wrote under the report (with cache hits and writes)."""
        g = self.reply
        out = self.run
        cost = _COST.search(line)
        if g is None or g.usage is None or cost is None or not out.surface.is_current(g.vid or 0):
            self._line("tool", line)
            return
        out.group = g
        self.add_line(g)
        g.usage = {**g.usage, "cost": float(cost.group(1).replace(",", ""))}
        self.flush_group(out)

    # -- blocks -----------------------------------------------------------------------------

    def _finish(self) -> None:
        """Emit the block of ``#### `` or ``> `` lines read so far."""
        block, self.block = self.block, None
        if block is None:
            return
        out = self.run
        info: dict[str, Any] = {"source": self.source, "lines": block.lines}
        info["raw"] = runs(block.raw)
        if self.time:
            info["time"] = self.time
        if block.kind == "user":
            text = "\n".join(t[:-2] if t.endswith("  ") else t.rstrip() for t in block.texts)
            text = text.strip("\n")
            prompt = self._prompt(text)
            if prompt is not None:
                self.start_turn(out)
                self.note_title(out, prompt)
                message = {"id": f"aider-{block.first}", "role": "user",
                           "parts": [text_part(prompt)]}  # fmt: skip
                self.emit(out, "user/message", {"message": message, "import": info},
                          self.key(n=block.first))  # fmt: skip
                return
        kind = "tool" if block.kind == "tool" else "command"
        self.raw_counts[kind] = self.raw_counts.get(kind, 0) + len(block.lines)
        self.emit(out, "import/raw", {"kind": kind, "known": True, "import": info},
                  self.key("raw", n=block.first), ignorable=True)  # fmt: skip

    @staticmethod
    def _prompt(text: str) -> str | None:
        """What a user block sends the model, or None (an instruction to Aider itself)."""
        if not text.strip() or text == _BLANK or _CONFIRM.search(text):
            return None
        if text.startswith("/"):
            m = _SWITCH.match(text)
            return m.group(2) if m is not None else None
        return text

    def eof(self, settled: bool) -> None:
        self._finish()
        super().eof(settled)


def history(path: Path) -> Input:
    """An Aider history read as it is, its sessions named after a hash of where it is (every
    repository's file has the same name) and its first run's start."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise FormatError(exc.strerror or str(exc), path=path) from None
    with open(fd, "rb") as f:
        head = f.read(_SNIFF)
    lines = head.decode("utf-8", "replace").splitlines()
    first = next((line.rstrip("\r") for line in lines if line.strip()), None)
    aider_like = first is None or first.startswith(("#### ", ">"))
    if not aider_like and not any(_HEADER.match(x.rstrip("\r")) for x in lines):
        raise FormatError(
            f"not an Aider chat history: no '# aider chat started at' line in its first "
            f"{_SNIFF // 1024} KiB",
            path=path,
        )
    where = os.path.abspath(path).encode("utf-8", "surrogatepass")
    digest = hashlib.sha256(where).hexdigest()[:10]
    found = _HEADER.match(first) if first is not None else None
    run = f"-{_stamp(found)}" if found is not None else ""
    return TextInput(path, f"{path.name}#{digest}{run}")


def _wanted(path: Path) -> bool:
    return path.name == NAME


AGENTS = (
    Agent(
        "aider",
        "Aider",
        AiderMapper,
        (),  # per project only: <repository>/.aider.chat.history.md
        NAME,
        _wanted,
        reader=history,
        projects=(NAME,),  # a dot-file: the read-only index walks this dot-name too
    ),
)
