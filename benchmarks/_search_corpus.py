"""The corpus of the search benchmark (issue 16): a tree of jsonltape sessions written with the
library, with text that looks like agent history.

* A Zipf vocabulary (rank r has weight 1/(r+1)) of real English words, code identifiers
  (CamelCase, snake_case, dotted paths, error names such as ``FileNotFoundError``) and made-up
  identifiers built from the same parts, shuffled so every kind appears at every rank.
* Messages of several kinds: English prose, code snippets, Japanese and Chinese sentences built
  from many distinct words (so short CJK queries have realistic, varied hits), and mixtures.
* Roles user, assistant (with a tool call) and tool, timestamps spread over six months; or
  (``times``) the same messages all in one second (``burst``), or stamped by the writer's own
  clock as the library writes them at full speed, sessions in parallel (``live``: what bulk
  ``append -``, a converted log or a fast multi-agent run leave).

Everything is seeded: the same arguments give the same bytes. Sessions are written in parallel
processes, each a contiguous range of sessions, so generation scales with cores. Word counts
are kept and saved beside the tree (``<tree>.json``) so the benchmark can pick queries by rank.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from itertools import accumulate
from pathlib import Path

import jsonltape

EVENTS_PER_SESSION = 1000
#: Bump when the generated text changes: a cached tree of another generator is rewritten.
GENERATOR = 1
VOCABULARY = 20_000
SEED = 16
#: 2026-01-01 UTC minus six months: sessions are spread from there to T_END.
T_END = 1_767_225_600_000
SPAN_MS = 182 * 86_400_000


def _split(words: str) -> list[str]:
    """Word lists are kept as wrapped text: a list literal of 600 words is unreadable."""
    return words.split()


_ENGLISH = _split("""
the of and to a in is it you that he was for on are with as I his they be at one
have this from or had by hot word but what some we can out other were all there when up use
your how said an each she which do their time if will way about many then them write would
like so these her long make thing see him two has look more day could go come did number sound
no most people my over know water than call first who may down side been now find any new work
part take get place made live where after back little only round man year came show every good
me give our under name very through just form sentence great think say help low line differ
turn cause much mean before move right boy old too same tell does set three want air well also
play small end put home read hand port large spell add even land here must big high such follow
act why ask men change went light kind off need house picture try us again animal point mother
world near build self earth father head stand own page should country found answer school grow
study still learn plant cover food sun four between state keep eye never last let thought city
tree cross farm hard start might story saw far sea draw left late run while press close night
real life few north open seem together next white children begin got walk example ease paper
group always music those both mark often letter until mile river car feet care second book
carry took science eat room friend began idea fish mountain stop once base hear horse cut sure
watch color face wood main enough plain girl usual young ready above ever red list though feel
talk bird soon body dog family direct pose leave song measure door product black short numeral
class wind question happen complete ship area half rock order fire south problem piece told knew
pass since top whole king space heard best hour better true during hundred five remember step
early hold west ground interest reach fast verb sing listen six table travel less morning ten
simple several vowel toward war lay against pattern slow center love person money serve appear
road map rain rule govern pull cold notice voice unit power town fine certain fly fall lead cry
dark machine note wait plan figure star box noun field rest correct able pound done beauty drive
stood contain front teach week final gave green oh quick develop ocean warm free minute strong
special mind behind clear tail produce fact street inch multiply nothing course stay wheel full
force blue object decide surface deep moon island foot system busy test record boat common gold
possible plane stead dry wonder laugh thousand ago ran check game shape equate miss brought heat
snow tire bring yes distant fill east paint language among migration database schema index query
commit branch merge rebase deploy release build pipeline container cluster service request
response timeout retry cache buffer stream socket thread process memory pointer allocate config
setting option argument parameter return value error exception warning failure success refactor
rename delete update insert select column table constraint transaction rollback session token
user password login logout permission role admin client server proxy endpoint route handler
middleware template render component state props hook effect reducer action dispatch store
naïve café résumé façade coöperate""")

_PARTS = _split("""user session file path config cache token request response handler manager
service client server parse load save read write open close build test check update delete
create fetch send get set init reset flush sync merge index query schema table row column
record event message stream buffer socket queue task job worker thread lock timer retry error
result value key item list map node tree graph edge batch chunk page frame block entry""")

_ERRORS = _split("""FileNotFoundError KeyError ValueError TypeError IndexError AttributeError
RuntimeError PermissionError TimeoutError ConnectionResetError ConnectionRefusedError
NotImplementedError ImportError ModuleNotFoundError UnicodeDecodeError JSONDecodeError
AssertionError ZeroDivisionError OSError BrokenPipeError IsADirectoryError StopIteration
RecursionError MemoryError OverflowError NullPointerException IllegalArgumentException
IllegalStateException ClassNotFoundException NoSuchElementException SegmentationFault
StackOverflowError OutOfMemoryError""")

_DOTTED = _split("""os.path.join os.path.exists sys.argv json.loads json.dumps re.compile
subprocess.run pathlib.Path sqlite3.connect asyncio.gather typing.Optional
collections.defaultdict functools.lru_cache itertools.chain logging.getLogger
unittest.mock.patch http.client datetime.timezone.utc numpy.ndarray torch.nn.Module
react.useEffect fs.readFileSync process.env.NODE_ENV console.log Array.prototype.map""")

# Japanese and Chinese words: sentences are random sequences of them with particles, so
# 1-4 character queries hit many distinct contexts.
_JA = _split("""
東京 大阪 天気 会議 資料 設定 確認 修正 削除 追加 変更 更新 検索 実行 失敗 成功 エラー
ファイル データ ベース 移行 接続 認証 権限 画面 表示 入力 出力 処理 関数 変数 引数 戻り値 型
テスト 結果 原因 問題 解決 方法 手順 環境 本番 開発 明日 今日 昨日 来週 午前 午後 時間 予定
東京都 新宿 渋谷 日本語 英語 翻訳 文字 改行 空白 記号 番号 名前 住所 電話
メール 送信 受信""")
_JA_GLUE = _split("の は が を に で と も から まで です ます でした ません ください")
_ZH = _split("""北京 上海 天气 会议 文件 设置 确认 修改 删除 添加 更新 搜索 执行 失败 成功 错误 数据
数据库 迁移 连接 认证 权限 页面 显示 输入 输出 处理 函数 变量 参数 返回 类型 测试 结果 原因
问题 解决 方法 步骤 环境 生产 开发 明天 今天 昨天 下周 上午 下午 时间 计划 中文 英文 翻译
字符 空格 符号 编号 名字 地址 电话 邮件 发送 接收 服务器 客户端 请求 响应 超时 重试""")
_ZH_GLUE = _split("的 了 是 在 和 也 就 都 要 会 请 吗 呢 吧")


def _identifiers(rng: random.Random, n: int) -> list[str]:
    out: set[str] = set()
    while len(out) < n:
        k = rng.randint(2, 3)
        ws = rng.sample(_PARTS, k)
        style = rng.random()
        if style < 0.35:
            out.add("".join(w.capitalize() for w in ws))  # CamelCase class
        elif style < 0.55:
            out.add(ws[0] + "".join(w.capitalize() for w in ws[1:]))  # camelCase
        elif style < 0.85:
            out.add("_".join(ws))  # snake_case
        elif style < 0.95:
            out.add(".".join(ws))  # dotted path
        else:
            out.add("".join(w.capitalize() for w in ws) + "Error")
    return sorted(out)


def vocabulary(seed: int = SEED, size: int = VOCABULARY) -> list[str]:
    """The vocabulary, most frequent first (Zipf rank = list index)."""
    rng = random.Random(seed)
    base = list(dict.fromkeys(_ENGLISH + _ERRORS + _DOTTED))
    made = _identifiers(rng, size - len(base))
    words = base + [w for w in made if w not in set(base)]
    words = words[:size]
    # English (and the well-known names) mostly take the top ranks, made-up identifiers spread
    # over all of them: prose reads like prose, and every kind appears at every rank.
    known = set(base)
    keys = {w: rng.random() * 700 if w in known else size * rng.random() ** 0.6 for w in words}
    words.sort(key=keys.__getitem__)
    for i, w in enumerate(["the", "to", "a", "of", "and"]):
        j = words.index(w)
        words[i], words[j] = words[j], words[i]
    return words


class _Text:
    def __init__(self, rng: random.Random, words: list[str]) -> None:
        self.rng = rng
        self.words = words
        self.cum = list(accumulate(1 / (i + 1) for i in range(len(words))))
        self.counts: Counter[int] = Counter()
        self.idx = range(len(words))

    def prose(self, n: int) -> str:
        ids = self.rng.choices(self.idx, cum_weights=self.cum, k=n)
        self.counts.update(ids)
        w = self.words
        return " ".join(w[i] for i in ids)

    def code(self) -> str:
        r = self.rng
        a, b, c = (self.prose(1) for _ in range(3))
        err = r.choice(_ERRORS)
        return r.choice(
            [
                f"def {a.replace('.', '_')}(path):\n    try:\n        return {b}(path)\n"
                f"    except {err} as exc:\n        raise {c} from exc\n",
                f'Traceback (most recent call last):\n  File "src/{a}.py", line '
                f"{r.randint(1, 900)}, in {b}\n{err}: {self.prose(6)}\n",
                f"const {a} = await {b}({{ retry: {r.randint(1, 9)} }});\n// {self.prose(8)}\n",
                f"SELECT {a}, {b} FROM {c} WHERE id = {r.randint(1, 10**6)};\n",
                f"$ git commit -m '{self.prose(6)}'\n[{a} {r.getrandbits(28):07x}] {c}\n",
            ]
        )

    def japanese(self) -> str:
        r = self.rng
        return "".join(
            r.choice(_JA) + r.choice(_JA_GLUE) for _ in range(r.randint(3, 12))
        ) + r.choice(["。", "？", "！"])

    def chinese(self) -> str:
        r = self.rng
        return "".join(
            r.choice(_ZH) + (r.choice(_ZH_GLUE) if r.random() < 0.5 else "")
            for _ in range(r.randint(3, 12))
        ) + r.choice(["。", "？", "！"])

    def message(self, lo: int, hi: int) -> str:
        k = self.rng.random()
        if k < 0.55:
            return self.prose(self.rng.randint(lo, hi))
        if k < 0.75:
            return self.prose(self.rng.randint(3, 12)) + "\n\n" + self.code()
        if k < 0.84:
            return self.japanese()
        if k < 0.92:
            return self.chinese()
        mixed = [self.prose(self.rng.randint(3, 10)), self.japanese(), self.chinese()]
        self.rng.shuffle(mixed)
        return " ".join(mixed)


#: How a tree's events are timed (``build``'s ``times``).
TIMES = ("spread", "burst", "live")


def _write_range(
    root: str, first: int, last: int, events: int, seed: int, times: str = "spread"
) -> dict[int, int]:
    words = vocabulary(seed)
    sessions_total = -(-events // EVENTS_PER_SESSION)
    counts: Counter[int] = Counter()
    for s in range(first, last):
        rng = random.Random(seed * 1_000_003 + s)
        tx = _Text(rng, words)
        n = min(EVENTS_PER_SESSION, events - s * EVENTS_PER_SESSION)
        t = T_END if times == "burst" else T_END - SPAN_MS + SPAN_MS * s // max(1, sessions_total)
        path = Path(root) / f"p{s % 40:02d}" / f"s{s:06d}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        sid = f"bench-{s:06d}"
        items: list[dict[str, object]] = []
        with jsonltape.open(
            path,
            create=True,
            session_id=sid,
            title=tx.prose(4),
            created=None if times == "live" else t,
            durability="manual",
        ) as tape:
            made = 1  # the header
            turn = 0
            while made < n:
                turn += 1
                c = f"call{turn}"
                # the same draws in every mode (the same messages); the burst's stay in one
                # second (the turn's events are 1-4 ms apart)
                step = rng.randint(1_000, 120_000)
                t += 0 if times == "burst" else step
                items += [
                    {"type": "turn/start", "data": {}, "time": t},
                    _msg("user/message", "user", f"u{turn}", tx.message(5, 40), t + 1),
                    {
                        "type": "assistant/message",
                        "surface": "append",
                        "time": t + 2,
                        "data": {
                            "message": {
                                "id": f"a{turn}",
                                "role": "assistant",
                                "parts": [
                                    {"type": "text", "content": tx.message(10, 60)},
                                    {
                                        "type": "tool_call",
                                        "id": c,
                                        "name": rng.choice(["Read", "Bash", "Edit", "Grep"]),
                                        "arguments": {"path": f"src/{tx.prose(1)}.py"},
                                    },
                                ],
                            }
                        },
                    },
                    {
                        "type": "tool/result",
                        "surface": "append",
                        "time": t + 3,
                        "data": {
                            "call_id": c,
                            "message": {
                                "id": f"t{turn}",
                                "role": "tool",
                                "parts": [
                                    {
                                        "type": "tool_call_response",
                                        "id": c,
                                        "response": tx.message(10, 80),
                                    }
                                ],
                            },
                        },
                    },
                    {
                        "type": "turn/end",
                        "data": {"turn": turn, "reason": "completed"},
                        "time": t + 4,
                    },
                ]
                made += 5
            items = items[: n - 1]
            if times == "live":  # the writer stamps each event with its own clock
                for item in items:
                    del item["time"]
            for i in range(0, len(items), 500):
                tape.append_batch(items[i : i + 500])
            items = []
            tape.flush()
        counts.update(tx.counts)
    return dict(counts)


def _msg(type_: str, role: str, mid: str, text: str, t: int) -> dict[str, object]:
    return {
        "type": type_,
        "surface": "append",
        "time": t,
        "data": {
            "message": {"id": mid, "role": role, "parts": [{"type": "text", "content": text}]}
        },
    }


def build(
    root: Path, events: int, *, seed: int = SEED, jobs: int | None = None, times: str = "spread"
) -> dict[str, object]:
    """Write the tree under ``root`` (reused when its manifest ``<root>.json`` matches); return the
    manifest: events, sessions, and each vocabulary word's occurrence count by rank. ``times``:
    one of :data:`TIMES` (module docs)."""
    assert times in TIMES, times
    manifest = root.with_name(root.name + ".json")  # beside the tree: grep reads the tree
    if manifest.exists():
        m: dict[str, object] = json.loads(manifest.read_text())
        made = (m.get("events"), m.get("seed"), m.get("generator"), m.get("times", "spread"))
        if made == (events, seed, GENERATOR, times):
            return m
    if root.exists():  # another size, seed or generator, or a run that was cut short
        shutil.rmtree(root)
    sessions = -(-events // EVENTS_PER_SESSION)
    jobs = jobs or min(os.cpu_count() or 1, max(1, sessions // 4))
    step = -(-sessions // jobs)
    counts: Counter[int] = Counter()
    ranges = [(a, min(sessions, a + step)) for a in range(0, sessions, step)]
    with ProcessPoolExecutor(len(ranges)) as pool:
        futs = [pool.submit(_write_range, str(root), a, b, events, seed, times) for a, b in ranges]
        for f in futs:
            counts.update(f.result())
    words = vocabulary(seed)
    m = {
        "generator": GENERATOR,
        "events": events,
        "seed": seed,
        "times": times,
        "sessions": sessions,
        "words": words,
        "counts": [counts.get(i, 0) for i in range(len(words))],
        "ja": _JA,
        "zh": _ZH,
    }
    manifest.write_text(json.dumps(m, ensure_ascii=False))
    return m
