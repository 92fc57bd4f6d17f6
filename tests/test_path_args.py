"""Every public function that takes a path refuses one that names no file with the library's
own error, naming the argument: a NUL, a lone surrogate, an empty string, or anything that is
not a ``str``/``os.PathLike[str]`` (bytes, a number, None, a PathLike giving bytes) is an
:class:`InvalidArgumentError` whose ``field`` is the argument, before anything is read or
written, never a bare ValueError or TypeError from the OS."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import jsonltape


class _FsPath:
    """An ``os.PathLike`` whose ``__fspath__`` gives what it was made with."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __fspath__(self) -> Any:
        return self.value

    def __repr__(self) -> str:
        return f"_FsPath({self.value!r})"


def _with(inserted: str) -> st.SearchStrategy[str]:
    """Any text with ``inserted`` somewhere in it."""
    return st.tuples(st.text(max_size=12), st.text(max_size=12)).map(
        lambda ab: ab[0] + inserted + ab[1]
    )


#: What names no file.
BAD = st.one_of(
    _with("\0"),
    _with(chr(0xD800)),  # a lone surrogate no file name encodes
    st.sampled_from([chr(c) for c in range(0xD800, 0xDC80, 0x40)]),
    st.just(""),
    st.binary(max_size=8),
    st.integers(),
    st.floats(allow_nan=True),
    st.none(),
    st.lists(st.text(max_size=3), max_size=2),
    st.binary(max_size=8).map(_FsPath),
    st.integers().map(_FsPath),
    _with("\0").map(_FsPath),
)


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A parent with messages and a fork of it, both real sessions."""
    root = tmp_path_factory.mktemp("paths")
    parent = root / "parent.jsonl"
    with jsonltape.open(parent, create=True, session_id="parent-1") as tape:
        tape.user("one")
        tape.assistant("two")
        tape.user("three")
    fork = jsonltape.fork(parent, 2, root / "fork.jsonl", session_id="fork-1").path
    return parent, Path(fork)


Call = Callable[[Any, Path, Path], object]

#: (public function, the argument under test, a call with every other argument good).
CALLS: list[tuple[str, str, Call]] = [
    ("read", "path", lambda b, p, f: list(jsonltape.read(b))),
    ("read follow", "path", lambda b, p, f: list(jsonltape.read(b, follow=True, idle_timeout=0))),
    ("lines", "path", lambda b, p, f: list(jsonltape.lines(b))),
    ("header", "path", lambda b, p, f: jsonltape.header(b)),
    ("verify", "path", lambda b, p, f: jsonltape.verify(b)),
    ("messages", "path", lambda b, p, f: jsonltape.messages(b)),
    (
        "messages parents",
        "parents['parent-1']",
        lambda b, p, f: jsonltape.messages(f, parents={"parent-1": b}),
    ),
    ("request_header", "path", lambda b, p, f: jsonltape.request_header(b)),
    (
        "request_header parents",
        "parents['parent-1']",
        lambda b, p, f: jsonltape.request_header(f, parents={"parent-1": b}),
    ),
    ("todo", "path", lambda b, p, f: jsonltape.todo(b)),
    (
        "todo parents",
        "parents['parent-1']",
        lambda b, p, f: jsonltape.todo(f, parents={"parent-1": b}),
    ),
    ("repair", "path", lambda b, p, f: jsonltape.repair(b)),
    ("open", "path", lambda b, p, f: jsonltape.open(b, create=True)),
    ("fork parent", "parent", lambda b, p, f: jsonltape.fork(b, 1)),
    ("fork out", "out", lambda b, p, f: jsonltape.fork(p, 1, b)),
    (
        "fork parents",
        "parents['parent-1']",
        lambda b, p, f: jsonltape.fork(f, 3, parents={"parent-1": b}),
    ),
    ("merge parent", "parent", lambda b, p, f: jsonltape.merge(b, f)),
    ("merge fork", "fork_path", lambda b, p, f: jsonltape.merge(p, b)),
    (
        "merge parents",
        "parents['parent-1']",
        lambda b, p, f: jsonltape.merge(p, f, parents={"parent-1": b}),
    ),
    ("discard parent", "parent", lambda b, p, f: jsonltape.discard(b, f)),
    ("discard fork", "fork_path", lambda b, p, f: jsonltape.discard(p, b)),
    (
        "discard parents",
        "parents['parent-1']",
        lambda b, p, f: jsonltape.discard(p, f, parents={"parent-1": b}),
    ),
    ("compact", "target", lambda b, p, f: jsonltape.compact(b, "sum", through=1)),
    ("compact with", "target", lambda b, p, f: jsonltape.compact(b, lambda i: "s", through=1)),
    ("prune", "target", lambda b, p, f: jsonltape.prune(b, 1)),
    ("retract", "target", lambda b, p, f: jsonltape.retract(b, 1)),
    ("restore", "target", lambda b, p, f: jsonltape.restore(b, 1)),
    ("revise", "target", lambda b, p, f: jsonltape.revise(b, 1, "new")),
    ("handoff", "target", lambda b, p, f: jsonltape.handoff(b, "sum")),
]


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize(("name", "field", "call"), CALLS, ids=[c[0] for c in CALLS])
@settings(max_examples=60, deadline=None)
@given(bad=BAD)
def test_a_path_that_names_no_file_is_an_invalid_argument_naming_it(
    sessions: tuple[Path, Path], name: str, field: str, call: Call, bad: Any
) -> None:
    assume(not (field == "out" and bad is None))  # None: the default, next to the parent
    parent, fork = sessions
    before, here = _tree(parent.parent), sorted(os.listdir())
    with pytest.raises(jsonltape.InvalidArgumentError) as caught:
        call(bad, parent, fork)
    assert caught.value.field == field, (name, caught.value)
    assert str(caught.value).startswith(f"{field}: {field} ")  # the argument named first
    assert _tree(parent.parent) == before and sorted(os.listdir()) == here  # nothing written


@pytest.mark.parametrize(("name", "field", "call"), CALLS, ids=[c[0] for c in CALLS])
def test_a_pathlike_naming_a_session_is_taken(
    sessions: tuple[Path, Path], name: str, field: str, call: Call
) -> None:
    """The control: the same calls get past the check with a good path-like (and fail, if
    they do, for another reason)."""
    parent, fork = sessions
    good = _FsPath(str(fork if field == "fork_path" else parent))
    if name in ("open", "fork out"):
        good = _FsPath(str(parent.with_name(f"new-{name.replace(' ', '-')}.jsonl")))
    try:
        result = call(good, parent, fork)
    except jsonltape.InvalidArgumentError as exc:
        assert exc.field != field, exc
        return
    except jsonltape.JsonltapeError:
        return  # a fold rule (a merged fork cannot be discarded, ...), not the path
    if isinstance(result, jsonltape.Tape):
        result.close()


def test_every_path_argument_of_the_public_api_is_tried() -> None:
    """A public function or argument taking a path that CALLS leaves out fails here."""
    import inspect

    wanted = set()
    for name in jsonltape.__all__:
        obj = getattr(jsonltape, name)
        if not inspect.isfunction(obj):
            continue
        for param in inspect.signature(obj).parameters.values():
            annotation = str(param.annotation)  # a string: the modules use PEP 563
            if any(t in annotation for t in ("PathLike", "Target", "Parents")):
                wanted.add((name, param.name))
    tried = {(name.split()[0], field.split("[")[0]) for name, field, _ in CALLS}
    assert wanted - tried == set()
    assert len(wanted) >= 20
