// Span checksums (format 1.1, §8.5 and §10.2): a checkpoint's `span` {from, crc} is the CRC-32
// of every byte from just after the previous session/flush line (or the header) up to the
// checkpoint. The reader may check those lines with one CRC instead of their own; every test
// here compares that path with per-line checking ({spans: false}), which must agree.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { crc32, hex8, scan, verify, readEvents, runCommand, stringifyJson } from '../jsonltape.mjs';

const SPANS = { spans: true };
const PER_LINE = { spans: false };
const VECTORS = fileURLToPath(new URL('../../vectors/', import.meta.url));
const CLI = fileURLToPath(new URL('../jsonltape.mjs', import.meta.url));

const line = (body) => { const b = Buffer.from(body); return Buffer.concat([b, Buffer.from(`,"crc":"${hex8(crc32(b))}"}\n`)]); };

/**
 * A 1.1 session as a conforming writer writes it (span.md): `items` are event objects
 * ({type, data?, ...}, seq and time added) or the string 'flush' / 'close' for a checkpoint.
 * Every checkpoint carries `span` as data's last member unless `spans` is false; `edit(data)`
 * may change a checkpoint's data before it is framed (to build non-conforming spans).
 */
function tape(items, { spans = true, edit = null } = {}) {
  const out = [line('{"seq":0,"type":"session/start","time":1,"data":{"format":"jsonltape","version":1,"minor":1,"id":"s","created":1}')];
  let offset = out[0].length;
  let from = offset;
  let spanCrc = 0;
  let turn = null;
  const put = (l, isFlush) => {
    out.push(l);
    if (isFlush) { from = offset + l.length; spanCrc = 0; } else spanCrc = crc32(l, spanCrc);
    offset += l.length;
  };
  for (const item of items) {
    const seq = out.length;
    if (item === 'flush' || item === 'close') {
      let data = { offset, seq: seq - 1, ...(turn ? { turn } : {}), ...(item === 'close' ? { closed: true } : {}) };
      if (spans) data.span = { from, crc: hex8(spanCrc) };
      if (edit) data = edit(data, seq);
      put(line(`{"seq":${seq},"type":"session/flush","time":${seq},"data":${stringifyJson(data)},"ignorable":true`), true);
      continue;
    }
    if (item.type === 'turn/start') turn = { seq, offset };
    if (item.type === 'turn/end') turn = null;
    const { type, data = {}, ...rest } = item;
    const extra = Object.keys(rest).length ? ',' + stringifyJson(rest).slice(1, -1) : '';
    put(line(`{"seq":${seq},"type":"${type}","time":${seq},"data":${stringifyJson(data)}${extra}`), false);
  }
  return Buffer.concat(out);
}

const user = (text) => ({ type: 'user/message', data: { message: { id: `u-${text}`, role: 'user', parts: [{ type: 'text', content: text }] } }, surface: 'append' });
const asst = (text, calls = []) => ({ type: 'assistant/message', data: { message: { id: `a-${text}`, role: 'assistant', parts: [{ type: 'text', content: text }, ...calls.map((id) => ({ type: 'tool_call', id, name: 'Read', arguments: {} }))] } }, surface: 'append' });
const result = (id) => ({ type: 'tool/result', data: { call_id: id, message: { id: `r-${id}`, role: 'tool', parts: [{ type: 'tool_call_response', id, response: 'ok' }] } }, surface: 'append' });
/** One turn with a tool round trip and a checkpoint inside and after it. */
const turn = (k) => [{ type: 'turn/start' }, user(`q${k}`), asst(`a${k}`, [`c${k}`]), { type: 'tool/call', data: { call_id: `c${k}`, name: 'Read' } }, 'flush', result(`c${k}`), asst(`done${k}`), { type: 'turn/end' }, 'flush'];
const SMALL = tape([...turn(1), ...turn(2), 'close']);

const ALL = ['read', 'verify', 'repair', 'fold'];
/** What the protocol answers (and verify's reason) for one input and one path. */
async function answers(input, opts, cmds = ALL) {
  const out = {};
  for (const cmd of cmds) out[cmd] = await runCommand(cmd, input, opts);
  try { out.reason = (await verify(input, opts)).reason; } catch (e) { out.reason = e.code; }
  return out;
}

async function assertPathsAgree(input, what, cmds = ALL) {
  assert.deepEqual(await answers(input, SPANS, cmds), await answers(input, PER_LINE, cmds), what);
}

test('clean 1.1 files: spans vouch for every line between checkpoints; both paths read the same', async () => {
  for (const n of [1, 3, 20]) {
    const f = tape([...Array.from({ length: n }, (_, k) => turn(k)).flat(), 'close']);
    const r = await scan(f, SPANS);
    assert.equal(r.state, 'clean');
    assert.equal(r.vouched, r.events - 1 - 2 * n - 1); // all but the header and the checkpoints
    assert.equal((await scan(f, PER_LINE)).vouched, 0);
    await assertPathsAgree(f, `${n} turns`);
  }
});

test('an empty span (two checkpoints in a row) has crc 00000000 and matches', async () => {
  const f = tape([user('x'), 'flush', 'flush', 'close']);
  assert.ok(f.includes('"span":{"from":'));
  assert.equal(f.toString().split('\n')[3].includes('"crc":"00000000"}'), true);
  assert.equal((await verify(f)).state, 'clean');
  await assertPathsAgree(f, 'empty spans');
});

test('a flipped byte at every position of a small 1.1 file: both paths give the same verdicts', async () => {
  // (fold reads what this scan commits; the fold tests compare it on whole files)
  for (let i = 0; i < SMALL.length; i++) {
    const bad = Buffer.from(SMALL);
    bad[i] ^= 0x01;
    await assertPathsAgree(bad, `byte ${i}`, ['read', 'verify']);
  }
});

test('a 1.1 file cut at every position: both paths give the same verdicts', async () => {
  for (let i = 0; i <= SMALL.length; i++) await assertPathsAgree(SMALL.subarray(0, i), `cut at ${i}`, ['verify']);
});

test('a damaged line under a span is found by its own CRC: verdict, B and committed events', async () => {
  const f = Buffer.from(SMALL);
  const at = f.indexOf('"q2"') + 1;
  f[at] ^= 0x01;
  const lineNo = f.subarray(0, at).toString('latin1').split('\n').length;
  for (const opts of [SPANS, PER_LINE]) {
    const v = await verify(f, opts);
    assert.deepEqual([v.state, v.line, v.events], ['corrupt', lineNo, lineNo - 1]);
    assert.match(v.reason, /^crc mismatch/);
  }
});

test('a span with a wrong crc or a wrong from is not used: each line is checked by its own CRC', async () => {
  const edits = {
    'wrong crc': (d) => ({ ...d, span: { ...d.span, crc: hex8((parseInt(d.span.crc, 16) ^ 1) >>> 0) } }),
    'from one byte late': (d) => ({ ...d, span: { ...d.span, from: d.span.from + 1 } }),
    'from one byte early': (d) => ({ ...d, span: { ...d.span, from: d.span.from - 1 } }),
    'from 0': (d) => ({ ...d, span: { ...d.span, from: 0 } }),
  };
  for (const [what, edit] of Object.entries(edits)) {
    const f = tape([...turn(1), 'close'], { edit });
    const r = await scan(f, SPANS);
    assert.deepEqual([r.state, r.vouched], ['clean', 0], what); // still valid checkpoints
    await assertPathsAgree(f, what);
    // ... and a damaged line under such a span is still found
    const bad = Buffer.from(f);
    bad[bad.indexOf('"q1"') + 1] ^= 0x01;
    assert.equal((await verify(bad, SPANS)).state, 'corrupt', what);
    await assertPathsAgree(bad, `${what}, damaged`);
  }
});

test('a malformed span makes a good session/flush line no valid checkpoint (§10.2)', async () => {
  // A turn left open, then a closing checkpoint: clean only if that checkpoint is valid.
  const closing = (spanJson) => rehash(tape([{ type: 'turn/start' }, user('x'), 'close'], { edit: (d) => ({ ...d, span: '@' }) })
    .toString().replace('"span":"@"', `"span":${spanJson}`));
  const malformed = {
    string: '"x"', array: '[]', 'no from': '{"crc":"00000000"}', 'no crc': '{"from":0}',
    'from 1.0': '{"from":1.0,"crc":"00000000"}', 'from 1e0': '{"from":1e0,"crc":"00000000"}',
    'from negative': '{"from":-1,"crc":"00000000"}', 'from past offset': '{"from":1000000,"crc":"00000000"}',
    'from a string': '{"from":"0","crc":"00000000"}', 'crc uppercase': '{"from":0,"crc":"ABCDEF01"}',
    'crc 7 digits': '{"from":0,"crc":"0000000"}', 'crc 9 digits': '{"from":0,"crc":"000000000"}',
    'crc a number': '{"from":0,"crc":0}', 'crc with a space': '{"from":0,"crc":" 0000000"}',
  };
  for (const [what, span] of Object.entries(malformed)) {
    for (const opts of [SPANS, PER_LINE]) {
      assert.deepEqual(await verify(closing(span), opts), { state: 'open-turn', events: 4, line: null, offset: null, reason: null }, what);
    }
  }
  // well-formed spans, right or wrong, with unknown members inside or not, and null (= absent,
  // as for turn) keep it valid
  for (const span of ['null', '{"from":0,"crc":"00000000"}', '{"from":5,"crc":"ffffffff","x-ext":[1]}', '{"x":1,"crc":"0badf00d","from":181}']) {
    assert.equal((await verify(closing(span))).state, 'clean', span);
  }
  const extended = tape([{ type: 'turn/start' }, user('x'), 'close'], { edit: (d) => ({ ...d, span: { ...d.span, 'x-ext': 1 } }) });
  assert.deepEqual(await scan(extended).then((r) => [r.state, r.vouched]), ['clean', 2]);
});

/** Recompute every line's CRC suffix of a file given as text (for hand-edited lines). */
const rehash = (text) => Buffer.concat(text.split('\n').slice(0, -1).map((l) => line(l.slice(0, -18))));

test('spans across read-chunk boundaries: every chunk size gives the same verdicts', async () => {
  const f = tape([...turn(1), ...turn(2), ...turn(3), 'close']);
  const damaged = Buffer.from(f);
  damaged[damaged.indexOf('"a2"') + 1] ^= 0x01;
  for (const input of [f, damaged]) {
    const whole = await answers(input, SPANS);
    for (const size of [1, 2, 7, 64, 333]) {
      const chunks = [];
      for (let i = 0; i < input.length; i += size) chunks.push(Uint8Array.from(input.subarray(i, i + size)));
      assert.deepEqual(await answers(chunks, SPANS), whole, `chunks of ${size}`);
      assert.deepEqual(await answers(chunks, PER_LINE), whole, `chunks of ${size}, per line`);
    }
  }
  const oneByte = [...f].map((b) => Uint8Array.of(b));
  assert.equal((await scan(oneByte, SPANS)).vouched, (await scan(f, SPANS)).vouched);
  assert.equal((await scan(f, SPANS)).vouched, 21); // every line but the header and the 7 checkpoints
});

test('past the hold limit the held lines are checked one by one: same verdicts, fewer vouched', async () => {
  const f = tape([...turn(1), ...turn(2), 'close']);
  const all = await scan(f, SPANS);
  for (const holdLimit of [0, 100, 400]) {
    const r = await scan(f, { spans: true, holdLimit });
    assert.equal(r.state, 'clean');
    assert.ok(r.vouched < all.vouched, `limit ${holdLimit}: ${r.vouched}`);
    for (let i = 0; i < f.length; i += 7) {
      const bad = Buffer.from(f);
      bad[i] ^= 0x01;
      const cmds = ['read', 'verify'];
      assert.deepEqual(await answers(bad, { spans: true, holdLimit }, cmds), await answers(bad, PER_LINE, cmds), `limit ${holdLimit}, byte ${i}`);
    }
  }
});

test('no line under a span is served before the span or its own CRC is checked', async () => {
  const f = tape([...turn(1), ...turn(2), 'close']);
  const recs = f.toString('latin1').split('\n').slice(0, -1).map((l) => Buffer.from(l + '\n', 'latin1'));
  const flushEnds = []; // end offset of each checkpoint line
  let end = 0;
  for (const r of recs) { end += r.length; if (r.includes('"session/flush"')) flushEnds.push(end); }
  let supplied = 0;
  async function* feed() { for (const r of recs) { supplied += r.length; yield r; } }
  let offset = 0;
  for await (const ev of readEvents(feed(), SPANS)) {
    const start = offset;
    offset += recs[ev.seq].length;
    if (ev.seq === 0 || ev.type === 'session/flush') continue;
    const covering = flushEnds.find((e) => e > start);
    assert.ok(supplied >= covering, `seq ${ev.seq} served after ${supplied} bytes, its checkpoint ends at ${covering}`);
  }
});

// A file *made* to disagree (span.md): a span that matches over a line whose own crc member is
// wrong does not conform, and readers MAY differ on it. This reader's span path accepts it,
// which shows that the lines under a matching span are not CRC-checked one by one.
function madeToDisagree() {
  const text = tape([user('x'), user('y'), 'close'], { spans: false }).toString();
  const lines = text.split('\n').slice(0, -1);
  lines[1] = lines[1].replace(/"crc":"[0-9a-f]{8}"\}$/, (m) => (m.includes('"00000000"') ? '"crc":"00000001"}' : '"crc":"00000000"}'));
  const head = Buffer.from(lines[0] + '\n');
  const covered = Buffer.from(lines[1] + '\n' + lines[2] + '\n');
  const flush = JSON.parse(lines[3]);
  flush.data.span = { from: head.length, crc: hex8(crc32(covered)) };
  delete flush.crc;
  return Buffer.concat([head, covered, line(stringifyJson(flush).slice(0, -1))]);
}

test('a matching span vouches for its lines without their own CRCs (a file made to disagree)', async () => {
  const f = madeToDisagree();
  assert.deepEqual(await verify(f, SPANS).then((v) => [v.state, v.events]), ['clean', 4]);
  assert.deepEqual(await verify(f, PER_LINE).then((v) => [v.state, v.line]), ['corrupt', 2]);
});

test('a span whose crc matches but whose from is not the previous checkpoint end is not used', async () => {
  // user x, checkpoint, user y (its own crc wrong), closing checkpoint whose span crc is right
  // over [from, offset): only a span from just after the first checkpoint may vouch for y.
  const lines = tape([user('x'), 'flush', user('y'), 'close'], { spans: false }).toString().split('\n').slice(0, -1);
  lines[3] = lines[3].replace(/"crc":"([0-9a-f]{8})"\}$/, (m, c) => `"crc":"${c === '00000000' ? '00000001' : '00000000'}"}`);
  const raw = Buffer.from(lines.slice(0, 4).join('\n') + '\n');
  const ends = []; // offsets just after each line
  for (let i = 0, o = 0; i < 4; i++) ends.push((o += Buffer.byteLength(lines[i]) + 1));
  const closingWith = (from) => {
    const ev = JSON.parse(lines[4]);
    ev.data.span = { from, crc: hex8(crc32(raw.subarray(from))) };
    delete ev.crc;
    return Buffer.concat([raw, line(stringifyJson(ev).slice(0, -1))]);
  };
  assert.deepEqual(await verify(closingWith(ends[2]), SPANS).then((v) => v.state), 'clean'); // made to disagree
  for (const from of [ends[0], 0, ends[1], ends[2] + 1]) {
    for (const opts of [SPANS, PER_LINE]) assert.deepEqual(await verify(closingWith(from), opts).then((v) => [v.state, v.line]), ['corrupt', 4], `from ${from}`);
  }
});

test('the CLI turns spans off with --no-spans or JSONLTAPE_SPANS=0', async () => {
  const { spawnSync } = await import('node:child_process');
  const f = madeToDisagree();
  const run = (args, env = {}) => JSON.parse(spawnSync(process.execPath, [CLI, ...args], { input: f, env: { ...process.env, ...env } }).stdout).state;
  assert.equal(run(['verify']), 'clean');
  assert.equal(run(['--no-spans', 'verify']), 'corrupt');
  assert.equal(run(['verify', '--no-spans']), 'corrupt');
  assert.equal(run(['verify'], { JSONLTAPE_SPANS: '0' }), 'corrupt');
  assert.equal(spawnSync(process.execPath, [CLI, '--spans', 'verify'], { input: f }).status, 2);
});

test('every conformance vector gets the same answers with and without spans', async () => {
  const inputs = [];
  const walkDir = (d) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walkDir(p);
      else if (/\.(jsonl|bin)$/.test(name)) inputs.push(p);
    }
  };
  walkDir(VECTORS);
  assert.ok(inputs.length > 100, `${inputs.length} vector inputs`);
  for (const p of inputs) await assertPathsAgree(readFileSync(p), p);
});
