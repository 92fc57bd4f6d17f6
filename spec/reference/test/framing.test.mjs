// Tests written from the spec text: §2 (the complete example), §5 (checksum), §4/§6/§7/§10.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  crc32, hex8, parseJson, stringifyJson, isInteger, verify, planRepair, readEvents, runCommand,
  TEXT_OUTCOME_UNKNOWN, TEXT_NOT_STARTED,
} from '../jsonltape.mjs';

const SPEC = fileURLToPath(new URL('../../jsonltape-v1.md', import.meta.url));
// The 14 lines of the §2 example, taken from the spec itself.
const EXAMPLE = (() => {
  const md = readFileSync(SPEC, 'utf8');
  const i = md.indexOf('## 2. A complete example');
  const block = md.slice(md.indexOf('```\n', i) + 4, md.indexOf('\n```', md.indexOf('```\n', i) + 4));
  return Buffer.from(block + '\n');
})();

const line = (body) => { const b = Buffer.from(body); return Buffer.concat([b, Buffer.from(`,"crc":"${hex8(crc32(b))}"}\n`)]); };
const HEADER = '{"seq":0,"type":"session/start","time":1,"data":{"format":"jsonltape","version":1,"id":"x","created":1}';
/** Build a file from bodies; "@OFF@" is replaced by the line's own offset. */
function file(...bodies) {
  const out = [];
  let off = 0;
  for (const b of bodies) {
    const l = Buffer.isBuffer(b) ? b : line(b.replaceAll('@OFF@', String(off)));
    out.push(l);
    off += l.length;
  }
  return Buffer.concat(out);
}
const ev = (seq, type, data = '{}', extra = '') => `{"seq":${seq},"type":"${type}","time":${seq * 10},"data":${data}${extra}`;
const flush = (seq, last, closed = false) => ev(seq, 'session/flush', `{"offset":@OFF@,"seq":${last}${closed ? ',"closed":true' : ''}}`, ',"ignorable":true');

test('CRC-32 check value (§5)', () => {
  assert.equal(hex8(crc32(Buffer.from('123456789'))), 'cbf43926');
  assert.equal(hex8(crc32(Buffer.alloc(0))), '00000000');
  // incremental use gives the same value
  assert.equal(hex8(crc32(Buffer.from('6789'), crc32(Buffer.from('12345')))), 'cbf43926');
});

test('worked checksum example (§5)', () => {
  const l = Buffer.from('{"seq":2,"type":"turn/start","time":1764460800010,"data":{},"crc":"6ddf222e"}\n');
  const checked = l.subarray(0, l.length - 19);
  // The spec text says "(60 bytes)"; the quoted bytes are 59 (spec erratum, see README.md).
  assert.equal(checked.length, 59);
  assert.equal(checked.toString(), '{"seq":2,"type":"turn/start","time":1764460800010,"data":{}');
  assert.equal(hex8(crc32(checked)), '6ddf222e');
});

test('checksum command', async () => {
  assert.deepEqual(await runCommand('checksum', Buffer.from('123456789')), { crc: 'cbf43926' });
  assert.deepEqual(await runCommand('checksum', [Buffer.from('1234'), Buffer.from('56789')]), { crc: 'cbf43926' });
});

test('§2 example: every CRC, seq and checkpoint is right; the file is clean', async () => {
  assert.equal(EXAMPLE.toString().split('\n').length, 15);
  const v = await verify(EXAMPLE);
  assert.deepEqual({ ...v, reason: undefined }, { state: 'clean', events: 14, line: null, offset: null, reason: undefined });
  const types = [];
  for await (const e of readEvents(EXAMPLE)) types.push(e.type);
  assert.equal(types[0], 'session/start');
  assert.equal(types.filter((t) => t === 'session/flush').length, 3);
  // lines 8, 13, 14 are checkpoints at offsets 1283, 2148, 2269 (§2 text)
  const offs = []; let off = 0;
  for (const l of EXAMPLE.toString().split('\n').slice(0, -1)) { offs.push(off); off += Buffer.byteLength(l) + 1; }
  assert.deepEqual([offs[7], offs[12], offs[13]], [1283, 2148, 2269]);
  assert.equal(offs[2], 419); // the turn/start the first checkpoint names
  assert.deepEqual(await planRepair(EXAMPLE).then((p) => [p.state, p.cut, p.kept, p.closers]), ['clean', null, 14, []]);
});

test('§2 example fed one byte at a time gives the same answer (streaming)', async () => {
  const chunks = [...EXAMPLE].map((b) => Uint8Array.of(b));
  assert.equal((await verify(chunks)).state, 'clean');
});

test('§2 example cut before its last two lines: open turn? no - turn ended; torn mid-line', async () => {
  const upto = EXAMPLE.indexOf('{"seq":12');
  assert.equal((await verify(EXAMPLE.subarray(0, upto))).state, 'clean');
  const torn = await verify(EXAMPLE.subarray(0, upto + 10));
  assert.deepEqual([torn.state, torn.events, torn.line, torn.offset], ['torn-tail', 12, 13, 2148]);
});

test('§2 example cut after the tool/call: open turn with a recorded call and an open step', async () => {
  const cut = EXAMPLE.indexOf('{"seq":8');
  const v = await verify(EXAMPLE.subarray(0, cut));
  assert.equal(v.state, 'open-turn');
  const p = await planRepair(EXAMPLE.subarray(0, cut));
  assert.deepEqual(p.closers.map((c) => c.type), ['tool/result', 'step/end', 'turn/end']);
  assert.deepEqual(p.closers[0], {
    type: 'tool/result',
    data: {
      call_id: 'call-1',
      message: { id: 'interrupted-call-1', role: 'tool', parts: [{ type: 'tool_call_response', id: 'call-1', response: TEXT_OUTCOME_UNKNOWN, is_error: true }] },
      error: { code: 'TOOL_OUTCOME_UNKNOWN', message: TEXT_OUTCOME_UNKNOWN },
      synthetic: true,
    },
    surface: 'append',
    sources: [6],
  });
  assert.deepEqual(p.closers[1].data, { step: 4, turn: 2, synthetic: true });
  assert.deepEqual(p.closers[2].data, { turn: 2, reason: 'interrupted', synthetic: true });
  assert.equal(p.time, 1764460800902); // the last committed event (the checkpoint)
});

test('a call only the assistant asked for is TOOL_NOT_STARTED, without sources', async () => {
  const cut = EXAMPLE.indexOf('{"seq":6');
  const p = await planRepair(EXAMPLE.subarray(0, cut));
  assert.equal(p.closers[0].data.error.code, 'TOOL_NOT_STARTED');
  assert.equal(p.closers[0].data.message.parts[0].response, TEXT_NOT_STARTED);
  assert.equal('sources' in p.closers[0], false);
});

test('corrupt: damage before a valid checkpoint (§10.2)', async () => {
  const bad = Buffer.from(EXAMPLE);
  bad[EXAMPLE.indexOf('Why does')] = 0x77; // flip a byte inside line 4 (seq 3)
  const v = await verify(bad);
  assert.deepEqual([v.state, v.events, v.line, v.offset], ['corrupt', 3, 4, 497]);
  await assert.rejects(planRepair(bad), { code: 'corrupt', line: 4, offset: 497 });
  assert.deepEqual((await planRepair(bad, { force: true })).cut, 497);
  const r = await runCommand('read', bad);
  assert.deepEqual(r, { ok: false, error: 'corrupt', line: 4, offset: 497 });
});

test('framing: bad lines of every kind are torn tails when nothing valid follows', async () => {
  const cases = {
    crlf: Buffer.concat([Buffer.from('{"seq":1,"type":"a/b","time":1,"data":{},"crc":"'), Buffer.from(hex8(crc32(Buffer.from('{"seq":1,"type":"a/b","time":1,"data":{}')))), Buffer.from('"}\r\n')]),
    uppercase: Buffer.from(`{"seq":1,"type":"a/b","time":1,"data":{},"crc":"${hex8(crc32(Buffer.from('{"seq":1,"type":"a/b","time":1,"data":{}'))).toUpperCase()}"}\n`),
    blank: Buffer.from('\n'),
    badUtf8: line(Buffer.concat([Buffer.from('{"seq":1,"type":"a/b","time":1,"data":{"x":"'), Buffer.from([0xff]), Buffer.from('"}')]).toString('latin1')).fill(0xff, 43, 44),
    floatSeq: line('{"seq":1.0,"type":"a/b","time":1,"data":{}'),
    expTime: line('{"seq":1,"type":"a/b","time":1e3,"data":{}'),
    wrongSeq: line('{"seq":2,"type":"a/b","time":1,"data":{}'),
    dataArray: line('{"seq":1,"type":"a/b","time":1,"data":[]'),
    noData: line('{"seq":1,"type":"a/b","time":1'),
    nan: line('{"seq":1,"type":"a/b","time":1,"data":{"x":NaN}'),
    loneSurrogate: line('{"seq":1,"type":"a/b","time":1,"data":{"x":"\\ud800"}'),
    noNewline: line('{"seq":1,"type":"a/b","time":1,"data":{}').subarray(0, -1),
  };
  // badUtf8 built above has a wrong CRC after the fill; rebuild it properly
  const raw = Buffer.concat([Buffer.from('{"seq":1,"type":"a/b","time":1,"data":{"x":"'), Buffer.from([0xc0, 0xaf]), Buffer.from('"}')]);
  cases.badUtf8 = Buffer.concat([raw, Buffer.from(`,"crc":"${hex8(crc32(raw))}"}\n`)]);
  for (const [name, bad] of Object.entries(cases)) {
    const v = await verify(file(HEADER, bad));
    assert.deepEqual([name, v.state, v.events, v.line, v.offset], [name, 'torn-tail', 1, 2, line(HEADER).length]);
  }
});

test('good lines: unknown members, whitespace, big integers, duplicate keys (last wins)', async () => {
  const v = await verify(file(HEADER,
    ev(1, 'x-ext/thing', '{"a":[1,2,{"b":null}]}', ',"zz":{"q":1}'),
    '{"seq":2, "type":"a/b",\t"time":3,"data":{"big":123456789012345678901234567890}',
    '{"seq":9,"seq":3,"type":"a/b","time":3,"data":{}'));
  assert.deepEqual([v.state, v.events], ['clean', 4]);
  // §5: a line starts with { (whitespace before it makes the line bad)
  const lead = await verify(file(HEADER, ' {"seq":1,"type":"a/b","time":3,"data":{}'));
  assert.deepEqual([lead.state, lead.line], ['torn-tail', 2]);
  // §6: optional envelope members have their types; surface, sources and key may be null
  assert.equal((await verify(file(HEADER, ev(1, 'a/b', '{}', ',"surface":null,"sources":null,"key":null')))).state, 'clean');
  // ignorable is a boolean; false means the same as absent
  assert.equal((await verify(file(HEADER, ev(1, 'a/b', '{}', ',"ignorable":false')))).state, 'clean');
  for (const extra of [',"ignorable":"yes"', ',"key":5', ',"sources":"x"', ',"sources":[1.5]', ',"surface":{"op":"insert"}', ',"surface":"prepend"']) {
    assert.equal((await verify(file(HEADER, ev(1, 'a/b', '{}', extra)))).state, 'torn-tail', extra);
  }
  const evs = [];
  for await (const e of readEvents(file(HEADER, ev(1, 'a/b', '{"big":123456789012345678901234567890,"f":1.5,"e":"\\u00e9\\ud83d\\ude00"}')))) evs.push(e);
  assert.equal(stringifyJson(evs[1].data), '{"big":123456789012345678901234567890,"f":1.5,"e":"é😀"}');
});

test('header (§7): not-jsonltape and version checks', async () => {
  const h = (data) => `{"seq":0,"type":"session/start","time":1,"data":${data}`;
  const cases = [
    [Buffer.alloc(0), 'not-jsonltape'],
    [Buffer.from('\n'), 'not-jsonltape'],
    [line(HEADER).subarray(0, 30), 'not-jsonltape'],
    [line(HEADER).subarray(0, -1), 'not-jsonltape'],
    [Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), line(HEADER)]), 'not-jsonltape'],
    [line(h('{"format":"other","version":1,"id":"x","created":1}')), 'not-jsonltape'],
    [line('{"seq":0,"type":"session/begin","time":1,"data":{"format":"jsonltape","version":1,"id":"x","created":1}'), 'not-jsonltape'],
    [line(h('{"format":"jsonltape","version":2,"id":"x","created":1}')), 'unsupported-version'],
    [line(h('{"format":"jsonltape","version":0,"id":"x","created":1}')), 'unsupported-version'],
    [line(h('{"format":"jsonltape","version":"1","id":"x","created":1}')), 'unsupported-version'],
    [line(h('{"format":"jsonltape","version":1.0,"id":"x","created":1}')), 'unsupported-version'],
    [line(h('{"format":"jsonltape","id":"x","created":1}')), 'unsupported-version'],
    [line(h('{"format":"jsonltape","version":1,"created":1}')), 'not-jsonltape'],
  ];
  for (const [bytes, code] of cases) {
    assert.deepEqual(await runCommand('verify', bytes), { error: code });
    assert.equal((await runCommand('read', bytes)).error, code);
  }
  // a newer minor version is accepted
  const v = await verify(line(h('{"format":"jsonltape","version":1,"minor":7,"id":"x","created":1,"future":true}')));
  assert.equal(v.state, 'clean');
});

test('classification (§10.2): open turn, closed on purpose, torn tail after checkpoint', async () => {
  const ts = ev(1, 'turn/start');
  assert.equal((await verify(file(HEADER, ts))).state, 'open-turn');
  assert.equal((await verify(file(HEADER, ts, flush(2, 1, true)))).state, 'clean');
  assert.equal((await verify(file(HEADER, ts, flush(2, 1)))).state, 'open-turn');
  assert.equal((await verify(file(HEADER, ts, ev(2, 'turn/end', '{"turn":1,"reason":"completed"}')))).state, 'clean');
  // a good-looking line after B is not served, and a checkpoint after B makes it corrupt
  const bad = Buffer.from('{"seq":2,"type":"a/b","time":1,"data":{},"crc":"00000000"}\n');
  const torn = await verify(file(HEADER, ts, bad, ev(3, 'a/b')));
  assert.deepEqual([torn.state, torn.events, torn.line], ['torn-tail', 2, 3]);
  const corrupt = await verify(file(HEADER, ts, bad, flush(3, 2)));
  assert.deepEqual([corrupt.state, corrupt.events, corrupt.line], ['corrupt', 2, 3]);
  // a witness is any checksummed session/flush envelope after B: its offset is not compared
  const wrong = file(HEADER, ts, bad, ev(3, 'session/flush', '{"offset":5,"seq":2}'));
  assert.equal((await verify(wrong)).state, 'corrupt');
  // but a session/flush that is not a framed envelope is no witness
  const broken = file(HEADER, ts, bad, '{"seq":3,"type":"session/flush","time":1.5,"data":{}');
  assert.equal((await verify(broken)).state, 'torn-tail');
  // and a closing checkpoint only closes when it is valid (its offset is its own)
  assert.equal((await verify(file(HEADER, ts, ev(2, 'session/flush', '{"offset":1,"seq":1,"closed":true}', ',"ignorable":true')))).state, 'open-turn');
  // repair of a torn tail after a clean close with an open turn: cut, no closers
  const p = await planRepair(file(HEADER, ts, flush(2, 1, true), Buffer.from('{"seq":3,')));
  assert.deepEqual([p.state, p.cut, p.kept, p.closers], ['torn-tail', line(HEADER).length + line(ts).length + line(flush(2, 1, true).replace('@OFF@', String(line(HEADER).length + line(ts).length))).length, 3, []]);
});

test('repair closers: order of first appearance, results, steps', async () => {
  const am = (seq, ids) => ev(seq, 'assistant/message', `{"message":{"id":"a${seq}","role":"assistant","parts":[${ids.map((i) => `{"type":"tool_call","id":"${i}","name":"n","arguments":{}}`).join(',')}]}}`, ',"surface":"append"');
  const tc = (seq, id) => ev(seq, 'tool/call', `{"call_id":"${id}","name":"n"}`);
  const tr = (seq, id) => ev(seq, 'tool/result', `{"call_id":"${id}","message":{"id":"r${seq}","role":"tool","parts":[{"type":"tool_call_response","id":"${id}","response":"ok"}]}}`, ',"surface":"append"');
  const f = file(HEADER, am(1, ['old']), ev(2, 'turn/start'), tc(3, 'b'), ev(4, 'step/start', '{"turn":2}'), am(5, ['a', 'b', 'c']), tr(6, 'a'), tc(7, 'c'));
  const p = await planRepair(f);
  assert.equal(p.state, 'open-turn');
  assert.deepEqual(p.closers.map((c) => [c.type, c.data.call_id ?? c.data.step ?? c.data.turn, c.data.error?.code ?? null, c.sources ?? null]), [
    ['tool/result', 'b', 'TOOL_OUTCOME_UNKNOWN', [3]],
    ['tool/result', 'c', 'TOOL_OUTCOME_UNKNOWN', [7]],
    ['step/end', 4, null, null],
    ['turn/end', 2, null, null],
  ]);
  assert.equal(p.time, 70);
});

test('deep nesting does not overflow the stack', async () => {
  const deep = '['.repeat(200000) + ']'.repeat(200000);
  assert.equal(stringifyJson(parseJson(deep)), deep);
  const v = await verify(file(HEADER, ev(1, 'a/b', `{"x":${deep}}`)));
  assert.equal(v.state, 'clean');
});

test('integers vs floats', () => {
  const o = parseJson('{"a":1,"b":1.0,"c":1e2,"d":-0,"e":9007199254740993,"f":2,"f":2.5}');
  assert.deepEqual(['a', 'b', 'c', 'd', 'e', 'f'].map((k) => isInteger(o, k)), [true, false, false, true, true, false]);
  assert.equal(typeof o.e, 'bigint');
  for (const bad of ['', '{', '{"a":1,}', '[1,]', '01', '1.', '.5', '+1', '"\\x"', '"a\tb"', 'NaN', 'Infinity', '{"a" 1}', '[1] x', "'a'", 'tru']) {
    assert.throws(() => parseJson(bad), undefined, bad);
  }
  const p = parseJson('{"__proto__":{"x":1}}');
  assert.equal(Object.getPrototypeOf(p), Object.prototype);
  assert.equal(stringifyJson(p), '{"__proto__":{"x":1}}');
});

test('a seq gap before a valid checkpoint is corrupt: the witness seq is not compared with its position', async () => {
  // seq 2 is skipped: lines 3.. carry seq = position + 1, the checkpoint's included
  const f = file(HEADER, ev(1, 'a/b'), ev(3, 'a/b'), ev(4, 'a/b'), flush(5, 4));
  const v = await verify(f);
  assert.deepEqual([v.state, v.events, v.line], ['corrupt', 2, 3]);
  // a byte turned into \n inside a line before a checkpoint: still corrupt
  const g = Buffer.from(file(HEADER, ev(1, 'a/b', '{"text":"hello world"}'), flush(2, 1)));
  g[g.indexOf('hello') + 2] = 0x0a;
  assert.equal((await verify(g)).state, 'corrupt');
});

test('a number too large for a double makes the line bad', async () => {
  const v = await verify(file(HEADER, ev(1, 'a/b', '{"x":1e400}')));
  assert.deepEqual([v.state, v.line], ['torn-tail', 2]);
});

test('the CLI speaks the protocol: one JSON object on stdout, exit 0, also for rejected input', async () => {
  const { spawnSync } = await import('node:child_process');
  const cli = fileURLToPath(new URL('../jsonltape.mjs', import.meta.url));
  const run = (cmd, input) => spawnSync(process.execPath, [cli, cmd], { input });
  let r = run('checksum', Buffer.from('123456789'));
  assert.equal(r.status, 0);
  assert.deepEqual(JSON.parse(r.stdout), { crc: 'cbf43926' });
  r = run('read', Buffer.from('not a session\n'));
  assert.equal(r.status, 0);
  assert.deepEqual(JSON.parse(r.stdout), { ok: false, error: 'not-jsonltape', line: null, offset: null });
  r = run('fold', EXAMPLE);
  assert.equal(r.status, 0);
  assert.deepEqual(JSON.parse(r.stdout).messages.map((m) => m.seq), [3, 5, 8, 10]);
  r = run('read', EXAMPLE);
  assert.equal(JSON.parse(r.stdout).events.length, 14);
  assert.notEqual(run('bogus', Buffer.alloc(0)).status, 0);
});

// §4 and §10.2: the good-line test covers every byte of the line, unknown members included at
// every level (envelope, surface object, data), and their names too.
const BAD_BITS = {
  'invalid UTF-8 (0xff)': Buffer.from([0x22, 0x78, 0xff, 0x79, 0x22]),
  'UTF-8 of a surrogate (ed a0 80)': Buffer.from([0x22, 0xed, 0xa0, 0x80, 0x22]),
  'overlong UTF-8 (c0 af)': Buffer.from([0x22, 0xc0, 0xaf, 0x22]),
  'lone high surrogate escape': Buffer.from('"\\ud800"'),
  'lone low surrogate escape': Buffer.from('"a\\udc00b"'),
};
const BAD_NUMBERS = ['1e400', '-1e400', '2e308', '1' + '0'.repeat(400), '-1' + '0'.repeat(400)];
const framed = (...parts) => { const b = Buffer.concat(parts.map((p) => (Buffer.isBuffer(p) ? p : Buffer.from(p)))); return Buffer.concat([b, Buffer.from(`,"crc":"${hex8(crc32(b))}"}\n`)]); };

test('a bad byte or number anywhere in a line, unknown members and names included, makes it bad (§4)', async () => {
  const places = {
    'envelope value': (v) => ['{"seq":1,"type":"a/b","time":1,"data":{},"x-ext":', v],
    'first envelope member': (v) => ['{"x-ext":', v, ',"seq":1,"type":"a/b","time":1,"data":{}'],
    'envelope name': (s) => ['{"seq":1,"type":"a/b","time":1,"data":{},', s, ':1'],
    'data value': (v) => ['{"seq":1,"type":"a/b","time":1,"data":{"v":', v, '}'],
    'data name': (s) => ['{"seq":1,"type":"a/b","time":1,"data":{', s, ':1}'],
    'nested array': (v) => ['{"seq":1,"type":"a/b","time":1,"data":{"v":[1,[{"w":[', v, ']}]]}'],
    'surface object value': (v) => ['{"seq":1,"type":"user/message","time":1,"data":{},"surface":{"op":"replace","start":0,"end":0,"x":', v, '}'],
    'surface object name': (s) => ['{"seq":1,"type":"user/message","time":1,"data":{},"surface":{"op":"retract","start":0,"end":0,', s, ':1}'],
  };
  for (const [where, make] of Object.entries(places)) {
    const name = where.endsWith('name');
    const payloads = { ...BAD_BITS, ...(name ? {} : Object.fromEntries(BAD_NUMBERS.map((n) => [n.slice(0, 8), Buffer.from(n)]))) };
    for (const [what, bytes] of Object.entries(payloads)) {
      const bad = framed(...make(bytes));
      const v = await verify(file(HEADER, bad));
      assert.deepEqual([where, what, v.state, v.line], [where, what, 'torn-tail', 2]);
      // ... and corrupt when a witness follows (the bad line is before a checkpoint)
      const w = await verify(file(HEADER, bad, flush(2, 1)));
      assert.deepEqual([where, what, w.state, w.line], [where, what, 'corrupt', 2]);
    }
    // the same places with good payloads are good lines: the rule is about the bytes
    for (const good of ['"ok"', '"\\ud83d\\ude00"', '"é"', '1.7976931348623157e308', '123456789012345678901234567890', '-0', '1e-400']) {
      if (name && !good.startsWith('"')) continue;
      assert.equal((await verify(file(HEADER, framed(...make(Buffer.from(good)))))).state, 'clean', `${where} ${good}`);
    }
  }
});

test('a bad byte in an unknown header member makes the file not a session; a bad witness is no witness', async () => {
  for (const bytes of Object.values(BAD_BITS)) {
    const h = framed('{"seq":0,"type":"session/start","time":1,"data":{"format":"jsonltape","version":1,"id":"x","created":1,"meta":{"k":', bytes, '}}');
    assert.deepEqual(await runCommand('verify', file(h, ev(1, 'a/b'))), { error: 'not-jsonltape' });
    // after damage, a session/flush holding a bad byte is not a witness: torn tail, not corrupt
    const badFlush = framed(`{"seq":3,"type":"session/flush","time":1,"data":{"offset":0,"seq":2},"ignorable":true,"x":`, bytes);
    const v = await verify(file(HEADER, ev(1, 'a/b'), line('{"seq":2,"type":"a/b"'), badFlush));
    assert.deepEqual([v.state, v.line], ['torn-tail', 3]);
  }
});

test('envelope ranges (§6): seq and seqs 0 ... 2^53-1, time 0 ... 253402300799999', async () => {
  const MAX = '9007199254740991';
  const cases = [
    ['time', 'time', '253402300799999', true],
    ['time', 'time', '253402300800000', false],
    ['time', 'time', '0', true],
    ['time', 'time', '-1', false],
    ['time', 'time', '9007199254740991', false],
    ['time', 'time', '18446744073709551616', false],
    ['sources', 'sources', `[0,${MAX}]`, true],
    ['sources', 'sources', '[9007199254740992]', false],
    ['sources', 'sources', '[-1]', false],
    ['sources', 'sources', '[18446744073709551616]', false],
    ['surface start', 'surface', `{"op":"replace","start":${MAX},"end":${MAX}}`, true],
    ['surface start', 'surface', '{"op":"replace","start":9007199254740992,"end":1}', false],
    ['surface end', 'surface', '{"op":"retract","start":1,"end":-1}', false],
    ['surface end', 'surface', '{"op":"retract","start":1,"end":18446744073709551616}', false],
  ];
  for (const [label, member, value, good] of cases) {
    const body = member === 'time'
      ? `{"seq":1,"type":"user/message","time":${value},"data":{}`
      : `{"seq":1,"type":"user/message","time":1,"data":{},"${member}":${value}`;
    const v = await verify(file(HEADER, body));
    assert.deepEqual([label, value, v.state], [label, value, good ? 'clean' : 'torn-tail']);
  }
  // a witness's seq is not compared with its position, but it is a seq: 0 ... 2^53-1
  const torn = line('{"seq":2,"type":"a/b"');
  const witness = (seq) => file(HEADER, ev(1, 'a/b'), torn, `{"seq":${seq},"type":"session/flush","time":1,"data":{"offset":@OFF@,"seq":1},"ignorable":true`);
  assert.equal((await verify(witness(MAX))).state, 'corrupt');
  assert.equal((await verify(witness('9007199254740992'))).state, 'torn-tail');
  assert.equal((await verify(witness('-1'))).state, 'torn-tail');
});

test('header (§7): a member of the table present as null has the wrong type; created is a time', async () => {
  const h = (extra) => line(`{"seq":0,"type":"session/start","time":1,"data":{"format":"jsonltape","version":1,"id":"x","created":1${extra}}`);
  for (const extra of [',"title":null', ',"cwd":null', ',"agent":null', ',"meta":null', ',"parent":null', ',"minor":null',
    ',"parent":{"session":"s","seq":0,"path":null}', ',"parent":{"session":"s","seq":0,"crc":null}',
    ',"parent":{"session":"s","seq":9007199254740992}', ',"parent":{"session":"s","seq":-1}']) {
    assert.deepEqual(await runCommand('verify', file(h(extra), ev(1, 'a/b'))), { error: 'not-jsonltape' }, extra);
  }
  const created = (c) => line(`{"seq":0,"type":"session/start","time":1,"data":{"format":"jsonltape","version":1,"id":"x","created":${c}}`);
  for (const c of ['-1', '253402300800000', '18446744073709551616', 'null']) {
    assert.deepEqual(await runCommand('verify', created(c)), { error: 'not-jsonltape' }, c);
  }
  assert.equal((await verify(created('253402300799999'))).state, 'clean');
  assert.equal((await verify(h(',"minor":12,"title":"","parent":{"session":"s","seq":0,"path":"p","crc":"c"}'))).state, 'clean');
});
