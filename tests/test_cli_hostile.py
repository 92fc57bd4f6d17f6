"""No traceback anywhere: every command of every group, over hostile files and values.

The commands are discovered from the click group, so a new command (or option) is covered
without touching this file. Each case runs in its own process, in a fresh directory holding
every hostile file, with its own data directory and ``HOME``. A case passes when the exit code
is a documented one, nothing on stderr is a traceback, and a failure says so in exactly one
line, ``jsonltape: error: ...`` (the verdict commands, ``verify`` and ``daemon status``, may
also fail silently: their verdict is on stdout).

Starting an interpreter per case would take minutes for the ~1,500 cases, so a driver process
(``python -m tests.test_cli_hostile``) imports the command line once and forks one child per
case; the child runs the console script's ``main()`` with its own stdin, stdout and stderr
files, and its real exit status is what counts. ``test_the_real_entry_point_agrees`` runs a
sample through ``python -m jsonltape`` itself and checks that it gives the same verdicts;
with ``JSONLTAPE_LONG=1`` every case is run that way.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import click
import pytest

REPO = Path(__file__).resolve().parents[1]
LONG = bool(os.environ.get("JSONLTAPE_LONG"))

#: Exit codes the README documents (0 ok, 1 repairable / not running, 2 bad input, 3 corrupt
#: or LSB "not running", 4 another writer, 5 I/O).
DOCUMENTED = {0, 1, 2, 3, 4, 5}
#: Commands whose non-zero exit is a verdict printed on stdout, not an error.
VERDICTS = {("verify",), ("daemon", "status")}
#: Commands that legitimately keep running (a daemon in the foreground, the web viewer) when
#: given good input.
FOREVER = {("daemon", "run"), ("serve",)}
TIMEOUT = 20.0
FOREVER_TIMEOUT = 1.0

T = 1_800_000_000_000  # a time well inside the format's range
BIG = 2**64


# -- the hostile files ---------------------------------------------------------------------


def _frame(obj_json: bytes) -> bytes:
    from jsonltape import _framing

    return _framing.frame(obj_json)


def _line(
    seq: int, type_: str, data: bytes = b"{}", *, time_: int | str = T, extra: bytes = b""
) -> bytes:
    return _frame(
        b'{"seq":%d,"type":"%s","time":%s,"data":%s%s}'
        % (seq, type_.encode(), str(time_).encode(), data, extra)
    )


def _header(data: bytes) -> bytes:
    return _line(0, "session/start", data)


_HEAD = b'{"format":"jsonltape","version":1,"id":"hostile","created":%d' % T
_USER = b'{"message":{"id":"m%d","role":"user","parts":[{"type":"text","content":"hello"}]}}'


def _good(where: Path) -> bytes:
    """A session written by the library: a turn with a tool round trip, closed."""
    import jsonltape

    from .helpers import one_turn

    p = where / "made-by-the-writer.jsonl"
    with jsonltape.open(p, create=True, session_id="good", title="good", durability="manual") as t:
        one_turn(t, "hello world", with_tool=True)
        one_turn(t, "NOT NULL migration")
    data = p.read_bytes()
    p.unlink()
    return data


def _session_files(good: bytes) -> dict[str, bytes]:
    """Session-like files: each a valid prefix plus one thing a reader must survive."""
    n = good.count(b"\n")
    head_only = _header(_HEAD + b"}")
    files = {
        "good.jsonl": good,
        "empty.jsonl": b"",
        "garbage.jsonl": bytes(range(256)) * 8 + b"\n\xff\xfe\x00\n",
        "not-json.jsonl": b"hello\nworld\n",
        "torn.jsonl": good + b'{"seq":%d,"type":"assistant/chu' % n,
        "corrupt.jsonl": good.replace(b"hello world", b"hellO world", 1),
        "bad-utf8-member.jsonl": good + _line(n, "user/note", extra=b',"x\xffy":1'),
        "bad-utf8-value.jsonl": good + _line(n, "user/note", extra=b',"x":"\xc3\x28"'),
        "1e400-member.jsonl": good + _line(n, "user/note", extra=b',"x":1e400'),
        "1e400-data.jsonl": good + _line(n, "user/note", data=b'{"x":1e400}'),
        "time-2^64.jsonl": good + _line(n, "user/note", time_=BIG),
        "time-2^53-1.jsonl": good + _line(n, "user/message", _USER % n, time_=2**53 - 1),
        "time-negative.jsonl": good + _line(n, "user/note", time_=-1),
        "seq-2^64.jsonl": good + _line(BIG, "user/note"),
        "surface-end-2^64.jsonl": good
        + _line(
            n,
            "assistant/message",
            b'{"message":{"id":"r","role":"assistant","parts":[{"type":"text","content":"x"}]}}',
            extra=b',"surface":{"op":"replace","start":1,"end":%d}' % BIG,
        ),
        "retract-2^64.jsonl": good
        + _line(
            n,
            "surface/retract",
            extra=b',"surface":{"op":"retract","start":%d,"end":%d}' % (BIG, BIG),
        ),
        "unknown-type.jsonl": good + _line(n, "x-foo/bar"),
        "unknown-ignorable.jsonl": good + _line(n, "x-foo/bar", extra=b',"ignorable":true'),
        "header-nulls.jsonl": _header(
            _HEAD + b',"title":null,"cwd":null,"agent":null,"meta":null,"parent":null}'
        )
        + _line(1, "user/message", _USER % 1),
        "header-created-2^64.jsonl": _header(
            b'{"format":"jsonltape","version":1,"id":"h","created":%d}' % BIG
        ),
        "fork-nul-path.jsonl": _header(
            _HEAD + b',"parent":{"session":"good","seq":3,"path":"a\\u0000b.jsonl"}}'
        )
        + _line(1, "user/message", _USER % 1),
        "fork-missing-parent.jsonl": _header(
            _HEAD + b',"parent":{"session":"nope","seq":3,"path":"../../nope.jsonl"}}'
        ),
        "version-99.jsonl": _header(b'{"format":"jsonltape","version":99,"id":"v","created":1}'),
        "deep-data.jsonl": head_only
        + _line(1, "user/note", b'{"a":' + b"[" * 20000 + b"]" * 20000 + b"}"),
        "huge-int-data.jsonl": good + _line(n, "user/note", data=b'{"x":%s}' % (b"9" * 5000)),
        "control-chars.jsonl": good
        + _line(
            n,
            "user/message",
            b'{"message":{"id":"c","role":"user","parts":[{"type":"text",'
            b'"content":"\\u001b[31m\\u0000\\u202e\\n"}]}}',
        ),
    }
    return files


def make_files(d: Path, good: bytes, names: set[str]) -> None:
    """The hostile files named in ``names`` (and ``good.jsonl``) in ``d``, the case's working
    directory; ``zoo/`` holds every session-like file, a FIFO and a symlink together."""
    files = _session_files(good)
    names = names | {"good.jsonl"}
    if names & {"zoo", "link-dir"}:
        zoo = d / "zoo"
        zoo.mkdir(mode=0o700)
        for name, data in files.items():
            _write(zoo / name, data)
        os.mkfifo(zoo / "fifo.jsonl", 0o600)
        os.symlink("good.jsonl", zoo / "link.jsonl")
        os.symlink("zoo", d / "link-dir")
    for name in names & set(files):
        _write(d / name, files[name])
    special = {
        "empty-dir": lambda p: p.mkdir(mode=0o700),
        "dir.jsonl": lambda p: p.mkdir(mode=0o700),
        "fifo.jsonl": lambda p: os.mkfifo(p, 0o600),
        "link.jsonl": lambda p: os.symlink("good.jsonl", p),
        "world-writable.jsonl": lambda p: _write(p, good, 0o666),
        "unreadable.jsonl": lambda p: _write(p, good, 0o000),
        NEWLINE_NAME: lambda p: _write(p, good),
        "world-writable-dir": _loose_dir,
    }
    for name in names & set(special):
        special[name](d / name)


def _write(path: Path, data: bytes, mode: int = 0o600) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, mode)


def _loose_dir(path: Path) -> None:
    path.mkdir()
    os.chmod(path, 0o777)
    _write(path / "good.jsonl", b"")


def names_in(argv: list[str]) -> set[str]:
    """The file names an argv mentions (``good=PATH``, ``codex:PATH`` and ``a/b`` included)."""
    out: set[str] = set()
    for token in argv:
        for part in (token, *token.replace(":", "=").split("=")):
            out.add(part.split("/")[0])
    return out


NEWLINE_NAME = "new\nline\x1b[31m\u202e.jsonl"


#: What a path argument is given: file names made by :func:`make_files`, and impossible ones.
PATHS = [
    "good.jsonl",
    "missing.jsonl",
    "missing-dir/s.jsonl",
    "dir.jsonl",
    "fifo.jsonl",
    "link.jsonl",
    "world-writable.jsonl",
    "unreadable.jsonl",
    NEWLINE_NAME,
    "x" * 300 + ".jsonl",  # one component longer than NAME_MAX
    "/".join(["d" * 200] * 30),  # longer than PATH_MAX
    "good.jsonl/x",  # a file used as a directory
    "-",
    "",
    *sorted(set(_session_files(b"").keys()) - {"good.jsonl"}),
]
#: What a directory argument is given.
DIRS = [
    "zoo",
    "empty-dir",
    "missing-dir",
    "good.jsonl",
    "fifo.jsonl",
    "link-dir",
    "world-writable-dir",
    "x" * 300,
    "",
]
TEXTS = [  # the first eight are the sample every option gets by default
    "",
    "null",
    "[1]",
    "\n\x1b[31m\u202e",
    '{"a":1e400}',
    '{"a":' + "[" * 5000 + "]" * 5000 + "}",
    "x" * 20000,
    '"',
    "5",
    "{",
    "[" * 5000,
    "=",
    "a=",
    "NEAR(",
]
INTS = ["-1", "0", str(2**70), "1e3", "abc", ""]
FLOATS = ["nan", "inf", "-inf", "-1", "1e400", "abc", ""]
#: The benign value of each kind of parameter, so that one hostile value is tested at a time.
_GOOD = {"path": "good.jsonl", "dir": "zoo", "int": "1", "seconds": "0", "text": "x"}


# -- the cases -----------------------------------------------------------------------------


@dataclass
class Case:
    argv: list[str]
    stdin: bytes = b""
    #: What the case varies, for the report (e.g. "PATH=fifo.jsonl").
    what: str = ""

    @property
    def command(self) -> tuple[str, ...]:
        return tuple(self.argv[:2]) if self.argv[0] in _GROUPS else tuple(self.argv[:1])


_GROUPS: set[str] = set()


def leaf_commands() -> list[tuple[tuple[str, ...], click.Command]]:
    """Every runnable command: the top level's and every group's subcommands."""
    from jsonltape.cli import cli

    out: list[tuple[tuple[str, ...], click.Command]] = []

    def walk(group: click.Group, prefix: tuple[str, ...]) -> None:
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            cmd = group.get_command(ctx, name)
            assert cmd is not None, name
            if isinstance(cmd, click.Group):
                _GROUPS.add(name)
                walk(cmd, (*prefix, name))
            else:
                out.append(((*prefix, name), cmd))

    walk(cli, ())
    return out


def _kind(param: click.Parameter) -> str:
    t = param.type
    if isinstance(t, click.Path):
        return "dir" if not t.file_okay else "path"
    if isinstance(t, (click.types.IntParamType, click.IntRange)):
        return "int"
    if t.name == "seconds" or isinstance(t, (click.types.FloatParamType, click.FloatRange)):
        return "seconds"
    if isinstance(t, click.Choice):
        return "choice"
    if param.name in ("session",) and isinstance(param, click.Argument):
        return "path"  # a session id, prefix or path
    return "text"


def _benign(param: click.Parameter) -> str:
    if isinstance(param.type, click.Choice):
        return str(param.type.choices[0])
    if param.name == "index_path":
        return "good.db"
    if param.name == "parent_specs":
        return "good=good.jsonl"
    if param.name == "sources" and isinstance(param, click.Option):
        return "codex:empty-dir"
    return _GOOD[_kind(param)]


def _hostile(param: click.Parameter) -> list[str]:
    """The values tried for ``param``: every hostile file for a path argument; for options
    a sample by default (the first, most telling values), everything with JSONLTAPE_LONG=1."""
    kind = _kind(param)
    full = LONG or isinstance(param, click.Argument)
    texts = TEXTS if full else TEXTS[:8]
    if kind == "path":
        return PATHS if full else PATHS[:14]
    if kind == "dir":
        return DIRS
    if kind == "int":
        return INTS
    if kind == "seconds":
        return FLOATS if full else FLOATS[:5]
    if kind == "choice":
        return ["bogus", ""]
    if param.name == "parent_specs":
        return [f"good={p}" for p in PATHS[:12]] + texts
    if param.name == "sources" and isinstance(param, click.Option):
        return [f"codex:{p}" for p in DIRS] + ["bogus:zoo", "codex", ":"] + texts[:4]
    return texts


def _argv(
    path: tuple[str, ...], cmd: click.Command, override: tuple[click.Parameter, str] | None
) -> list[str]:
    """The command with every required (and useful) parameter benign, one possibly hostile."""
    opts: list[str] = []
    args: list[str] = []
    for param in cmd.params:
        if isinstance(param, click.Option) and param.is_flag:
            continue
        if override is not None and param is override[0]:
            value = override[1]
        elif param.required or param.name in ("index_path", "parent_specs"):
            value = _benign(param)
        elif isinstance(param, click.Argument) and param.name != "stdin":
            value = _benign(param)  # optional ROOT, QUERY...: give one so the command works
        else:
            continue
        if isinstance(param, click.Option):
            opts += [param.opts[0], value]
        else:
            args.append(value)
    # `--` keeps an argument such as "-1" from being read as an option
    return [*path, *opts, *(["--"] if any(a.startswith("-") for a in args) else []), *args]


def cases() -> list[Case]:
    out: list[Case] = []
    for path, cmd in leaf_commands():
        out.append(Case(_argv(path, cmd, None), what="benign"))
        for param in cmd.params:
            if isinstance(param, click.Option) and param.is_flag:
                continue
            if param.name in ("stdin",):
                continue
            for value in _hostile(param):
                label = param.opts[0] if isinstance(param, click.Option) else param.name.upper()
                out.append(Case(_argv(path, cmd, (param, value)), what=f"{label}={value[:60]!r}"))
    out += _stdin_cases()
    return out


def _stdin_cases() -> list[Case]:
    lines = [
        b'{"type":"user/note","data":null}',
        b"[1]",
        b"null",
        b'{"type":"user/note","data":{"a":1e400}}',
        b'{"type":"user/note","x\xffy":1}',
        b'{"type":"user/note","data":{"a":"\xc3\x28"}}',
        b'{"type":"user/note","time":18446744073709551616}',
        b'{"type":"user/note","time":9007199254740991}',
        b'{"type":"x-foo/bar"}',
        b'{"type":5}',
        b'{"type":"user/note","surface":{"op":"replace","start":1,"end":18446744073709551616}}',
        b'{"type":"user/note","sources":[18446744073709551616]}',
        b'{"type":"user/note","key":""}',
        b'{"type":"user/note","data":' + b"[" * 20000 + b"]" * 20000 + b"}",
        b"\xff\xfe",
    ]
    return [
        Case(["append", "good.jsonl", "-"], stdin=line + b"\n", what=f"stdin={line[:60]!r}")
        for line in lines
    ]


# -- running them -----------------------------------------------------------------------------


@dataclass
class Result:
    case: dict[str, Any]
    rc: int | None  #: None: still running at the timeout (killed)
    stdout: str = ""
    stderr: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _prepare(case_dir: Path, template: Path, good: bytes, case: Case) -> None:
    case_dir.mkdir(mode=0o700)
    make_files(case_dir, good, names_in(case.argv))
    shutil.copyfile(template / "good.db", case_dir / "good.db")
    os.chmod(case_dir / "good.db", 0o600)
    (case_dir / "home").mkdir(mode=0o700)


def _env(case_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JSONLTAPE_")}
    env.update(
        JSONLTAPE_HOME=str(case_dir / "home"),
        HOME=str(case_dir),
        XDG_CONFIG_HOME=str(case_dir / ".config"),
        PYTHONPATH=str(REPO),
        COLUMNS="100",
    )
    return env


def _kill_strays(base: Path) -> None:
    """End the daemons a `daemon start` case left running (found by their working paths)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if str(base).encode() in cmdline and b"daemon" in cmdline:
            try:
                os.kill(int(entry.name), signal.SIGKILL)
            except OSError:
                pass


def _fork_case(case: Case, case_dir: Path) -> int:
    """Fork a child that runs the console script's main() for ``case``; return its pid."""
    (case_dir / ".stdin").write_bytes(case.stdin)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    code = 70
    try:
        os.setsid()
        os.chdir(case_dir)
        os.environ.clear()
        os.environ.update(_env(case_dir))
        out = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        for fd, name, flags in (
            (0, ".stdin", os.O_RDONLY),
            (1, ".stdout", out),
            (2, ".stderr", out),
        ):
            new = os.open(name, flags, 0o600)
            os.dup2(new, fd)
            os.close(new)
        sys.argv = ["jsonltape", *case.argv]
        from jsonltape.cli import main

        try:
            main()
            code = 0
        except SystemExit as exc:
            if exc.code is None:
                code = 0
            elif isinstance(exc.code, int):
                code = exc.code
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code & 0xFF)


def _collect(case: Case, case_dir: Path, rc: int | None) -> Result:
    def read(name: str) -> str:
        try:
            return (case_dir / name).read_bytes().decode("utf-8", "replace")
        except OSError:
            return ""

    return Result(asdict(case), rc, read(".stdout")[-2000:], _clip(read(".stderr")))


def _clip(text: str) -> str:
    """Keep the head (the error line) and the tail (a traceback's last line) of stderr."""
    return text if len(text) <= 8000 else text[:4000] + " [...] " + text[-4000:]


def _timeout(case: Case) -> float:
    return FOREVER_TIMEOUT if case.command in FOREVER else TIMEOUT


def run_forked(all_cases: list[Case], base: Path, jobs: int = 2) -> list[Result]:
    """Run each case in a forked child, ``jobs`` at a time."""
    from jsonltape.cli import cli

    for path, _cmd in leaf_commands():  # import every command module once, before forking
        cli.get_command(click.Context(cli), path[0])
    import jsonltape_daemon.service.daemon  # noqa: F401  (watchdog, for `daemon run`)

    template, good = _template(base)
    results: list[Result | None] = [None] * len(all_cases)
    running: dict[int, tuple[int, float]] = {}  # pid -> (case index, deadline)
    started: dict[int, float] = {}
    todo = list(enumerate(all_cases))
    while todo or running:
        while todo and len(running) < jobs:
            i, case = todo.pop(0)
            case_dir = base / f"c{i}"
            _prepare(case_dir, template, good, case)
            pid = _fork_case(case, case_dir)
            started[pid] = time.monotonic()
            running[pid] = (i, started[pid] + _timeout(case))
        time.sleep(0.002)
        for pid, (i, deadline) in list(running.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            rc: int | None
            if done:
                rc = os.waitstatus_to_exitcode(status)
            elif time.monotonic() > deadline:
                os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                rc = None
            else:
                continue
            del running[pid]
            case = all_cases[i]
            result = _collect(case, base / f"c{i}", rc)
            result.extra["seconds"] = round(time.monotonic() - started[pid], 3)
            results[i] = result
            if case.command[:1] == ("daemon",):
                _kill_strays(base / f"c{i}")
            shutil.rmtree(base / f"c{i}", onerror=_force_remove)
    _kill_strays(base)
    return [r for r in results if r is not None]


def _force_remove(func: Any, path: str, _exc: Any) -> None:
    parent = os.path.dirname(path)
    os.chmod(parent, 0o700)
    if os.path.lexists(path) and not os.path.islink(path):
        os.chmod(path, stat.S_IRWXU)
    func(path)


def run_real(case: Case, base: Path, n: int) -> Result:
    """Run one case through ``python -m jsonltape`` in a fresh directory."""
    template, good = _template(base)
    case_dir = base / f"r{n}"
    _prepare(case_dir, template, good, case)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "jsonltape", *case.argv],
            input=case.stdin,
            capture_output=True,
            cwd=case_dir,
            env=_env(case_dir),
            timeout=_timeout(case),
            start_new_session=True,
        )
        rc: int | None = proc.returncode
        out, err = proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as exc:
        rc, out = None, ""
        err = (exc.stderr or b"").decode("utf-8", "replace")
    _kill_strays(case_dir)
    shutil.rmtree(case_dir, onerror=_force_remove)
    return Result(asdict(case), rc, out[-2000:], _clip(err))


_TEMPLATES: dict[Path, tuple[Path, bytes]] = {}


def _template(base: Path) -> tuple[Path, bytes]:
    """The good session and an index of it, made once per run."""
    if base in _TEMPLATES:
        return _TEMPLATES[base]
    template = base / "template"
    (template / "root").mkdir(parents=True, mode=0o700)
    good = _good(template)
    (template / "root" / "good.jsonl").write_bytes(good)
    proc = subprocess.run(
        [sys.executable, "-m", "jsonltape", "sync", "root", "--index", "good.db"],
        cwd=template,
        capture_output=True,
        text=True,
        env=_env(template),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    _TEMPLATES[base] = (template, good)
    return template, good


# -- the verdict ------------------------------------------------------------------------------


def problem(result: Result) -> str | None:
    """What is wrong with a result, or None."""
    case = Case(**result.case)
    err = result.stderr
    if result.rc is None:
        return None if case.command in FOREVER else f"no exit within {_timeout(case):g} s (hang)"
    if "Traceback" in err:
        return "traceback: " + err.strip().splitlines()[-1][:200]
    if result.rc not in DOCUMENTED:
        return f"undocumented exit code {result.rc}"
    lines = err.splitlines()
    if result.rc != 0:
        if not lines and case.command in VERDICTS:
            return None
        errors = [ln for ln in lines if ln.startswith("jsonltape: error: ")]
        if len(lines) != 1 or len(errors) != 1:
            return f"exit {result.rc} with {len(lines)} stderr lines: {err[:300]!r}"
    return None


def _report(results: list[Result]) -> list[str]:
    out = []
    for r in results:
        why = problem(r)
        if why is not None:
            argv = " ".join(
                repr(a) if not a.isprintable() or " " in a or not a else a for a in r.case["argv"]
            )
            stdin = f" <<< {r.case['stdin'][:60]!r}" if r.case["stdin"] else ""
            out.append(f"jsonltape {argv[:200]}{stdin}: {why}")
    return out


# -- the tests --------------------------------------------------------------------------------


def _driver(all_cases: list[Case], base: Path) -> list[Result]:
    """Run the fork driver in its own interpreter (pytest's process has threads and capture)."""
    payload = json.dumps({"base": str(base), "cases": [asdict(c) for c in all_cases]}, default=_b)
    proc = subprocess.run(
        [sys.executable, "-m", "tests.test_cli_hostile"],
        input=payload.encode(),
        capture_output=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
    return [Result(**r) for r in json.loads(proc.stdout, object_hook=_unb)]


def _b(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"__bytes__": value.hex()}
    raise TypeError(type(value))


def _unb(obj: dict[str, Any]) -> Any:
    if set(obj) == {"__bytes__"}:
        return bytes.fromhex(obj["__bytes__"])
    return obj


def test_every_command_is_covered() -> None:
    """The discovery walks every group: a command added anywhere is in the table."""
    names = {path for path, _cmd in leaf_commands()}
    assert {("new",), ("index", "status"), ("daemon", "stop"), ("import",)} <= names
    covered = {Case(c.argv).command for c in cases()}
    assert covered == names


def test_no_command_prints_a_traceback_or_more_than_one_error_line(tmp_path: Path) -> None:
    all_cases = cases()
    if LONG:
        results = [run_real(c, tmp_path, i) for i, c in enumerate(all_cases)]
    else:
        results = _driver(all_cases, tmp_path)
    assert len(results) == len(all_cases)
    bad = _report(results)
    assert not bad, f"{len(bad)} of {len(results)} cases:\n" + "\n".join(bad)


def test_the_real_entry_point_agrees(tmp_path: Path) -> None:
    """A sample, one hostile case per command, gives the same exit code through
    ``python -m jsonltape`` as through the forked driver (so the driver is faithful)."""
    sample: list[Case] = []
    seen: set[tuple[str, ...]] = set()
    for c in cases():
        if c.command not in seen and c.what != "benign" and c.command not in FOREVER:
            seen.add(c.command)
            sample.append(c)
    forked = _driver(sample, tmp_path / "forked")
    _template(tmp_path / "real")  # once, before the threads share it
    with ThreadPoolExecutor(2) as pool:
        real = list(
            pool.map(lambda ic: run_real(ic[1], tmp_path / "real", ic[0]), enumerate(sample))
        )
    assert [(r.case["argv"], r.rc) for r in real] == [(f.case["argv"], f.rc) for f in forked]


def _serve() -> None:
    request = json.loads(sys.stdin.buffer.read(), object_hook=_unb)
    base = Path(request["base"])
    base.mkdir(parents=True, exist_ok=True)
    results = run_forked([Case(**c) for c in request["cases"]], base)
    sys.stdout.write(json.dumps([asdict(r) for r in results], default=_b))


@pytest.fixture(autouse=True)
def _no_strays(tmp_path: Path) -> Iterator[None]:
    yield
    _kill_strays(tmp_path)


if __name__ == "__main__":
    _serve()
