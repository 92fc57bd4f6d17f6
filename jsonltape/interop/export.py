"""Export a session to share it: a transcript people read, or the messages a program sends.

Formats:

* ``markdown``: a transcript (header, then every message in order with its time and model;
  reasoning and tool calls in ``<details>`` blocks, each tool call with its result).
* ``html``: the same as one self-contained file: inline CSS, no scripts, no external
  resources (a Content-Security-Policy forbids any request), readable on a phone, tool calls
  and reasoning collapsible, every text HTML-escaped (event text is data, never markup).
* ``json``: the neutral fold (``jsonltape messages``): the model-visible history as logged.
* ``openai`` / ``anthropic``: the request body a program would send (``jsonltape.fold``).
* ``atif``: a trajectory in Harbor's Agent Trajectory Interchange Format (ATIF-v1.7), the
  session's sub-agents embedded (:mod:`._export_atif`).
* ``otel``: an OTLP JSON trace (``ExportTraceServiceRequest``) in the OpenTelemetry GenAI
  conventions: a span per turn, per model call (with its input and output messages) and per
  tool call (:mod:`._export_otel`).

``atif`` and ``otel`` say what the target format cannot carry (revisions, retractions,
compaction boundaries, turns, ...): one note, and a documented field of the document.

The transcript shows the conversation as it happened: the current messages and those a
compaction later replaced (the summary appears where the compaction happened); earlier
versions of revised messages and retracted branches are left out and counted in the header.
Times are the source's own for imported sessions.

Redaction (:class:`~jsonltape.interop.redaction.Redactor`) is applied to the data before it is
rendered, and secret masking once more to the rendered text, so nothing a pattern matches can
slip through a field the renderer added. An open or torn session exports its committed part;
:attr:`Export.notes` says so, and so does the end of a transcript (without the local path).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

from .. import fold, reader
from ._render import render_html, render_markdown
from ._transcript import transcript
from .redaction import Redactor, mask_secrets

__all__ = ["FORMATS", "Export", "ExportFormat", "export", "export_to", "transcript"]

ExportFormat = Literal["markdown", "html", "json", "openai", "anthropic", "atif", "otel"]
FORMATS: tuple[str, ...] = ("markdown", "html", "json", "openai", "anthropic", "atif", "otel")
_enc = msgspec.json.Encoder()


@dataclass
class Export:
    """An export: the text to write, notes for stderr, and the redaction summary."""

    text: str
    notes: list[str] = field(default_factory=list)
    redacted: str | None = None


def _state_notes(report: reader.Report) -> list[str]:
    """What a reader of the export should know about the session's state, in words."""
    if report.state == "torn-tail":
        cut = report.size - report.committed_bytes
        return [
            f"torn tail at line {report.line}: its last {cut} bytes (after byte "
            f"{report.committed_bytes}) were being written when the writer stopped, or were "
            "copied mid-write; they are not committed and not in this export"
        ]
    if report.open_turn is None:
        return []
    turn = f"the turn that started at seq {report.open_turn} has no end"
    if report.state == "open-turn":  # no clean close: a live or crashed writer
        return [
            f"{turn}: the agent was still running, or it crashed; the transcript shows what "
            "was committed, so its last step may be missing"
        ]
    return [  # closed cleanly with the turn open: left open on purpose (spec: MUST NOT close)
        f"{turn}: its writer closed the session with the turn still open (to go on later); "
        "the transcript shows everything written so far"
    ]


def _json(obj: Any) -> str:
    return msgspec.json.format(_enc.encode(obj), indent=2).decode() + "\n"


def export(
    path: str | os.PathLike[str],
    format: ExportFormat,
    *,
    redact_tools: bool = False,
    redact_secrets: bool = False,
    parents: dict[str, str | os.PathLike[str]] | None = None,
) -> Export:
    """Export the session at ``path`` (its committed part) in ``format``."""
    chunks: list[str] = []
    done = export_to(
        chunks.append,
        path,
        format,
        redact_tools=redact_tools,
        redact_secrets=redact_secrets,
        parents=parents,
    )
    done.text = "".join(chunks)
    return done


def export_to(
    write: Callable[[str], object],
    path: str | os.PathLike[str],
    format: ExportFormat,
    *,
    redact_tools: bool = False,
    redact_secrets: bool = False,
    parents: dict[str, str | os.PathLike[str]] | None = None,
) -> Export:
    """:func:`export`, the text given to ``write`` as it is made (the OTLP trace a line at a
    time: its size grows with calls times history, so it is never held whole); the
    :class:`Export` returned has the notes and the redaction summary and an empty ``text``."""
    if format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {format!r}")
    state = _state_notes(reader.verify(path))
    red = Redactor(tools=redact_tools, secrets=redact_secrets)
    dropped: list[str] = []
    # Anything a renderer put together is masked once more. The OTLP trace does it itself, a
    # message at a time: one line of it holds a whole history inside one JSON string, where a
    # rule that runs to the end of a line (`docker login … -p X`) would join the texts of
    # different messages into a secret none of them holds.
    again = redact_secrets and format != "otel"
    for chunk in _chunks(path, format, red, parents, state, dropped):
        write(mask_secrets(chunk, red.masked) if again else chunk)
    notes = [f"{path}: {note}" for note in (*state, *dropped)]
    return Export("", notes, red.summary() if red.active else None)


def _chunks(
    path: str | os.PathLike[str],
    format: str,
    red: Redactor,
    parents: dict[str, str | os.PathLike[str]] | None,
    state: list[str],
    dropped: list[str],
) -> Iterator[str]:
    """The export's text in pieces (one, but for the OTLP trace's lines). The trace formats
    add the line saying what they dropped to ``dropped`` once the document is made (it is in
    the document too: ATIF ``notes`` and ``extra.jsonltape.dropped``, the OTLP root span's
    ``jsonltape.dropped``); their modules load only when asked for."""
    if format == "atif":
        from ._export_atif import atif

        doc, lost = atif(path, red, parents=parents)
        line = lost.line(format)
        if line:  # the state notes stay on stderr: a torn file exports as its committed part
            doc["notes"] = line
            dropped.append(line)
        yield _json(doc)
        return
    if format == "otel":
        from ._export_otel import otel

        lost = yield from otel(path, red, parents=parents)
        line = lost.line(format)
        dropped += [line] if line else []
        return
    if format in ("json", "openai", "anthropic"):
        neutral = fold.messages(path, parents=parents)
        items = [red.item(i) for i in neutral["messages"]]
        header = red.value(neutral.get("header"))
        if format == "json":
            out: dict[str, Any] = {"session": red.text(neutral["session"]), "seq": neutral["seq"]}
            if header is not None:
                out["header"] = header
            out["messages"] = items
            yield _json(out)
        elif format == "openai":
            yield _json(fold.openai_request(items, header))
        else:
            yield _json(fold.anthropic_request(items, header))
        return
    model = transcript(path, red, parents=parents)
    model["state"] = state  # a transcript says it at its end, where it stops
    yield render_markdown(model) if format == "markdown" else render_html(model)
