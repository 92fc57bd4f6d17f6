"""Markdown and HTML renderings of a transcript model (see :func:`export.transcript`).

Both put each tool call together with its result (found by call id), fold reasoning and tool
calls into ``<details>``, and treat every string from the session as data, never as markup.

Message text (text and reasoning parts) is usually Markdown written by a model, so both read
it as Markdown with markdown-it-py (CommonMark plus tables and strikethrough), raw HTML off
and only ``http``, ``https`` and ``mailto`` links taken as links:

* HTML renders the parsed tree (headings, lists, code, emphasis, tables); links get
  ``rel="noopener noreferrer nofollow"``, and an image becomes a link to it (the page loads
  nothing, and a remote image would be a tracking pixel).
* Markdown writes the parsed tree back out as Markdown in which every character of text is
  literal: the characters CommonMark gives a meaning to are backslash-escaped, code spans and
  fences get a backtick run longer than any inside them, links are rebuilt from their parsed
  (safe) address. Escaping the whole text instead would keep it safe too but show a model's
  headings and lists as ``\\#`` and ``\\-``; writing the tree back keeps them, and whatever a
  CommonMark reader makes of the input, the output holds no tag from it (no ``<`` it could
  read as HTML, no link or image it did not get from this writer).

Text longer than :data:`MARKDOWN_LIMIT` (a pasted log or file; markdown-it-py reads about
1 MB/s) is shown as it is, preformatted. Everything else from the session (titles, paths,
tool names, arguments, results) is literal text: HTML-escaped, or Markdown-escaped, or in a
fence longer than any backtick run inside it.

The work is split by job: :mod:`._render_common` holds the parser and the walk over the model
both renderings share, :mod:`._render_md` writes Markdown and :mod:`._render_html` the HTML
page. This module is the one the exporter (and the tests) import from.
"""

from __future__ import annotations

from ._render_common import _MD as _MD
from ._render_common import MARKDOWN_LIMIT as MARKDOWN_LIMIT
from ._render_common import _describe as _describe
from ._render_html import render_html as render_html
from ._render_md import _md_escape as _md_escape
from ._render_md import _md_message as _md_message
from ._render_md import render_markdown as render_markdown

__all__ = ["MARKDOWN_LIMIT", "render_html", "render_markdown"]
