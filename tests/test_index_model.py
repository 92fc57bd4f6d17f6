"""Model-based test of the ingest engine: random operations on a tree of sessions (appends,
revisions, tool calls and their results, raw surface operations that the fold may refuse,
torn tails, crashed turns, repairs, replacements, deletes, renames, recreations, touches,
corruption) interleaved with syncs. After every sync the index must equal a rebuild from
scratch, its full-text tables must agree with it, every session's state must be what
``jsonltape.verify`` says, and every message's status what ``SurfaceFold`` says.

Syncs alternate between a full rescan and a sync of just the paths touched since the last one
(what the daemon's watcher hints give it), so both paths of the engine are held to the model.
The first sync is a bulk load (its full-text indexes built in a helper process for odd seeds);
the substring index then catches up in random-sized steps or at once, so the full-text tables
are checked both while it is partial and once it is complete.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest
from jsonltape_daemon.engines.sqlite.store import SqliteStore
from jsonltape_daemon.ingest.ingestor import Budget, Ingestor

import jsonltape
from jsonltape.errors import SurfaceError
from jsonltape.events import SURFACE_TYPES, Replace, Retract
from jsonltape.fold import SurfaceFold

from .conftest import LONG
from .test_index_helpers import dump, fold_statuses, fts_ok, raw_append, rebuild, user_data

DIRS = ("a", "b", "a/deep")


class World:
    def __init__(self, root: Path, rng: random.Random) -> None:
        self.root = root
        self.rng = rng
        self.n = 0
        self.touched: set[str] = set()

    def paths(self) -> list[Path]:
        return sorted(self.root.rglob("*.jsonl"))

    def fresh_path(self) -> Path:
        self.n += 1
        d = self.root / self.rng.choice(DIRS)
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        return d / f"s{self.n}.jsonl"

    def touch(self, *paths: Path) -> None:
        self.touched.update(str(p) for p in paths)

    # -- operations ----------------------------------------------------------------------

    def create(self, path: Path | None = None) -> None:
        path = path or self.fresh_path()
        with jsonltape.open(path, create=True, title=f"t{self.n}", durability="manual") as tape:
            self._turns(tape, self.rng.randint(0, 2))
        self.touch(path)

    def _turns(self, tape: jsonltape.Tape, n: int) -> None:
        rng = self.rng
        for i in range(n):
            with tape.turn():
                tape.user(
                    rng.choice(["fix the migration", "naïve café", "東京都の天気", "x"]) + str(i)
                )
                if rng.random() < 0.3:
                    tape.tool_call("Read", {"p": "a.py"}, call_id=f"c{tape.next_seq}")
                    tape.tool_result(f"c{tape.next_seq - 1}", "FileNotFoundError: a.py")
                if rng.random() < 0.4:  # calls declared by the assistant, then answered
                    ids = [f"k{tape.next_seq}", f"k{tape.next_seq}b"][: rng.randint(1, 2)]
                    calls = [{"id": c, "name": "Grep", "arguments": {"q": "雨"}} for c in ids]
                    tape.assistant("looking", tool_calls=calls)
                    for c in ids:
                        for _ in range(rng.choice([1, 1, 2])):
                            tape.tool_result(c, f"result of {c}")
                # with usage: copies of a file (replace_with_other) share its responses' keys
                tape.assistant("ok " + str(i), model="m", usage={"input_tokens": i + 1})

    def append(self, path: Path) -> None:
        with jsonltape.open(path, durability="manual") as tape:
            r = self.rng.random()
            fold = SurfaceFold()
            for ev in jsonltape.read(path):
                fold.apply(ev)
            nodes = [s for s in fold.nodes]
            users = [s for s in nodes if self._type(path, s) == "user/message"]
            if r < 0.25 and users:
                s = self.rng.choice(users)
                tape.append(
                    "user/message",
                    user_data("revised text"),
                    surface={"op": "replace", "start": s, "end": s},
                    sources=[s],
                )
            elif r < 0.4 and len(users) >= 2:
                a, b = sorted(self.rng.sample(users, 2))
                inside = [s for s in nodes if fold.anchor(a) <= fold.anchor(s) <= fold.anchor(b)]  # type: ignore[operator]
                tape.close()
                summary = sum(1 for _ in jsonltape.read(path))
                # Written raw: the compaction vocabulary's own rules are not under test here.
                raw_append(path, [("compaction/summary", {"summary": "s"})])
                raw_append(
                    path,
                    [("user/message", user_data("summary of the migration work"))],
                    surface={"op": "replace", "start": a, "end": b},
                    sources=[*inside, summary],
                )
            elif r < 0.5 and nodes:
                s = self.rng.choice(nodes)
                tape.append("surface/retract", {}, surface={"op": "retract", "start": s, "end": s})
            else:
                self._turns(tape, self.rng.randint(1, 3))
        self.touch(path)

    def _type(self, path: Path, seq: int) -> str:
        for ev in jsonltape.read(path, from_seq=seq):
            return ev.type
        return ""

    def raw_surface(self, path: Path) -> None:
        """A surface operation written raw (no writer checks it): a replace or retract over a
        random range, of any message type, with right or wrong sources. The fold may refuse
        it; the index must then say ``rejected`` exactly where the fold does."""
        if jsonltape.verify(path).state != "clean":
            return
        rng = self.rng
        fold = SurfaceFold()
        messages: list[int] = []
        results: list[str] = []
        for ev in jsonltape.read(path):
            if ev.type in SURFACE_TYPES:
                messages.append(ev.seq)
                if ev.type == "tool/result":
                    results.append(str(ev.data.get("call_id")))
            try:
                fold.apply(ev)
            except SurfaceError:
                pass
        nodes = fold.nodes
        if not nodes:
            return
        pool = nodes if rng.random() < 0.85 else messages
        a, b = rng.choice(pool), rng.choice(pool)
        if rng.random() < 0.8 and fold.anchor(a) is not None and fold.anchor(b) is not None:
            a, b = sorted((a, b), key=lambda x: fold.anchor(x) or 0)
        items: list[tuple[str, dict[str, object]]] = []
        compaction = None
        if rng.random() < 0.3:
            compaction = sum(1 for _ in jsonltape.read(path))
            kind = rng.choice(["compaction/summary", "compaction/prune", "handoff/anchor"])
            items.append((kind, {"summary": "s"}))
        op: Replace | Retract
        if rng.random() < 0.35:
            op = Retract(a, b)
            type_ = "surface/retract" if rng.random() < 0.9 else "user/message"
            data: dict[str, object] = {} if type_ == "surface/retract" else user_data("bad")
        else:
            op = Replace(a, b)
            type_ = rng.choice(["user/message", "assistant/message", "tool/result"])
            data = user_data("revised via raw")
            if type_ == "assistant/message":
                keep = [c for c in results if rng.random() < 0.5]
                parts = [{"type": "tool_call", "id": c, "name": "Grep"} for c in keep]
                data = {"message": {"id": "r", "role": "assistant", "parts": parts}}
            elif type_ == "tool/result":
                call = rng.choice(results) if results and rng.random() < 0.8 else "nope"
                data = {
                    "call_id": call,
                    "message": {
                        "id": "p",
                        "role": "tool",
                        "parts": [{"type": "tool_call_response", "id": call, "response": "…"}],
                    },
                }
        try:
            sources = fold.removed_by(type_, op, None, data)  # type: ignore[arg-type]
        except SurfaceError:
            sources = [s for s in nodes if fold.anchor(s) is not None][:3]
        if sources and rng.random() < 0.15:
            sources.pop(rng.randrange(len(sources)))
        if compaction is not None and rng.random() < 0.8:
            sources.append(compaction)
        extra: dict[str, object] = {
            "surface": {"op": op.__struct_config__.tag, "start": a, "end": b}
        }
        if isinstance(op, Replace) or rng.random() < 0.2:
            extra["sources"] = sources
        items.append((type_, data))
        raw_append(path, items, **extra)
        self.touch(path)

    def crash_open_turn(self, path: Path) -> None:
        if jsonltape.verify(path).state != "clean":
            return
        raw_append(path, [("turn/start", {}), ("user/message", user_data("crashed turn"))])
        self.touch(path)

    def torn_tail(self, path: Path) -> None:
        with open(path, "ab") as f:
            f.write(b'{"seq":999,"type":"user/mess')
        self.touch(path)

    def repair(self, path: Path) -> None:
        if jsonltape.verify(path).state in ("torn-tail", "open-turn"):
            jsonltape.repair(path)
            self.touch(path)

    def replace_with_other(self, path: Path) -> None:
        others = [p for p in self.paths() if p != path]
        if others:
            tmp = path.with_name(".swap.tmp")
            shutil.copyfile(self.rng.choice(others), tmp)
            os.replace(tmp, path)
            self.touch(path)

    def delete(self, path: Path) -> None:
        path.unlink()
        self.touch(path)

    def rename(self, path: Path) -> None:
        dest = self.fresh_path()
        os.rename(path, dest)
        self.touch(path, dest)

    def recreate(self, path: Path) -> None:
        path.unlink()
        self.create(path)

    def touch_only(self, path: Path) -> None:
        os.utime(path)
        self.touch(path)

    def truncate_to_older(self, path: Path) -> None:
        """A 'git checkout' of an older version: the file shrinks to an earlier line end."""
        data = path.read_bytes()
        ends = [i + 1 for i, b in enumerate(data) if b == 0x0A]
        if len(ends) > 2:
            path.write_bytes(data[: self.rng.choice(ends[1:-1])])
            self.touch(path)

    def corrupt(self, path: Path) -> None:
        data = bytearray(path.read_bytes())
        if len(data) > 600:
            i = self.rng.randrange(300, len(data) - 200)
            data[i] = ord("#") if data[i] != ord("#") else ord("%")
            path.write_bytes(bytes(data))
            self.touch(path)


OPS = [
    ("create", 3),
    ("append", 6),
    ("raw_surface", 4),
    ("crash_open_turn", 2),
    ("torn_tail", 2),
    ("repair", 3),
    ("replace_with_other", 1),
    ("delete", 1),
    ("rename", 2),
    ("recreate", 1),
    ("touch_only", 1),
    ("truncate_to_older", 1),
    ("corrupt", 1),
]


def check(world: World, store: SqliteStore) -> None:
    got, want = dump(store.con), rebuild(world.root)
    for part in ("files", "sessions"):
        for key in sorted(set(got[part]) | set(want[part])):
            assert got[part].get(key) == want[part].get(key), (part, key)
    assert got == want
    fts_ok(store.con)
    states = dict(store.con.execute("SELECT path, state FROM sessions"))
    for path in world.paths():
        p = str(path)
        if p not in states:
            continue
        assert states[p] == jsonltape.verify(path).state, p
        expected = fold_statuses(path)
        sid = store.con.execute("SELECT sid FROM sessions WHERE path = ?", (p,)).fetchone()[0]
        got = dict(store.con.execute("SELECT seq, status FROM messages WHERE sid = ?", (sid,)))
        assert got == expected, p


@pytest.mark.parametrize("seed", range(12 if LONG else 3))
def test_random_operations_keep_index_equal_to_rebuild(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    world = World(root, rng)
    # A tiny budget forces many transactions, so cursors are committed mid-file too. Odd seeds
    # hand the full-text indexes of the first (bulk) sync to a helper process.
    store = SqliteStore(tmp_path / "index.db", helper_from=0 if seed % 2 else None)
    engine = Ingestor(store, root, budget=Budget(rows=7, seconds=1.0), bulk_budget=Budget(9, 1.0))
    names, weights = zip(*OPS, strict=True)
    for _ in range(3):
        world.create()
    steps = 120 if LONG else 45
    for step in range(steps):
        for i in range(rng.randint(1, 3)):
            op = rng.choices(names, weights)[0]
            if op == "corrupt" and i > 0:
                continue
            paths = world.paths()
            if op == "create" or not paths:
                world.create()
            elif op == "corrupt":
                # Damage that comes with growth is only seen by a rebuild; damage alone is
                # seen at the next sync (a same-size change is checked in full).
                world.corrupt(rng.choice(paths))
                break
            else:
                target = rng.choice(paths)
                world.touch(target)  # even if the op fails half-way (a writer cut a tail)
                try:
                    getattr(world, op)(target)
                except jsonltape.JsonltapeError:
                    pass  # e.g. appending to a corrupt file is refused; nothing was written
        if step % 2:
            engine.sync_paths(world.touched)
        else:
            engine.rescan()
        world.touched.clear()
        if rng.random() < 0.15:  # the substring index catches up: all at once (the helper's
            engine.build_substrings()  # if there is one) or in a few small steps
        elif rng.random() < 0.2 and not store.substrings_waiting():
            for _ in range(rng.randint(1, 3)):
                store.begin()
                store.build_substrings(rng.choice([1, 5, 1000]))
                store.commit()
        check(world, store)
    store.close()
