"""Every agent jsonltape imports: the :class:`~._agent.Agent` each importer module declares
(its ``AGENTS``), in the order ``import --from auto`` searches them.

A new importer adds its module to :data:`MODULES`; nothing else lists agents (the command's
choices, discovery, the defaults ``import --from auto`` searches, the kinds ``sync --source``
indexes in place, the README's table of default paths, checked by tests/test_interop_auto.py,
all come from here).
"""

from __future__ import annotations

from importlib import import_module

from ._agent import Agent

__all__ = ["AGENTS", "MODULES", "agent"]

#: The importer modules (relative to this package), each with an ``AGENTS`` tuple.
MODULES = (
    ".claude_code",
    ".codex",
    ".pi",
    ".gemini",
    ".opencode",
    ".aider",
    ".cline",
    ".goose",
    ".crush",
    ".qwen",
    ".kimi",
    ".droid",
    ".openhands",
    ".amp",
    ".copilot_cli",
    ".copilot_vscode",
    ".continue_dev",
    ".cursor",
)


def _load() -> dict[str, Agent]:
    found: dict[str, Agent] = {}
    for name in MODULES:
        for a in import_module(name, __package__).AGENTS:
            if a.name in found:  # pragma: no cover - a declaration error caught by the tests
                raise ValueError(f"two importers declare the agent {a.name!r}")
            found[a.name] = a
    return found


#: Every agent by name, in :data:`MODULES` order.
AGENTS: dict[str, Agent] = _load()


def agent(name: str) -> Agent | None:
    return AGENTS.get(name)
