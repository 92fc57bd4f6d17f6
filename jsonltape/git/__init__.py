"""Git archives of sessions: setup, merge driver, readable diffs and the commit guard.

Nothing here is imported by ``import jsonltape``; the ``jsonltape git`` commands load it.
"""

from __future__ import annotations

__all__: list[str] = []
