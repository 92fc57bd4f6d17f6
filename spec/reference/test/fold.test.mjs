// Fold tests written from the spec's fold section (§8.6, §8.7) and §9.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { crc32, hex8, fold, runCommand } from '../jsonltape.mjs';

const line = (body) => { const b = Buffer.from(body); return Buffer.concat([b, Buffer.from(`,"crc":"${hex8(crc32(b))}"}\n`)]); };
/** A session from event bodies without seq (seq = position); the header is added. */
function session(events, { id = 's', parent = null } = {}) {
  const hdr = { format: 'jsonltape', version: 1, id, created: 1, ...(parent ? { parent } : {}) };
  const bodies = [`{"seq":0,"type":"session/start","time":1,"data":${JSON.stringify(hdr)}`];
  events.forEach((e, i) => bodies.push(`{"seq":${i + 1},${JSON.stringify(e).slice(1, -1)}`));
  return Buffer.concat(bodies.map(line));
}
const user = (id, text = id) => ({ type: 'user/message', time: 2, data: { message: { id, role: 'user', parts: [{ type: 'text', content: text }] } }, surface: 'append' });
const asst = (id, calls = [], text = null) => ({ type: 'assistant/message', time: 3, data: { message: { id, role: 'assistant', parts: [...(text ? [{ type: 'text', content: text }] : []), ...calls.map((c) => ({ type: 'tool_call', id: c, name: 'Read', arguments: {} }))] } }, surface: 'append' });
const result = (c, extra = {}) => ({ type: 'tool/result', time: 4, data: { call_id: c, message: { id: `r-${c}`, role: 'tool', parts: [{ type: 'tool_call_response', id: c, response: 'ok' }] }, ...extra }, surface: 'append' });
const replace = (e, start, end, sources) => ({ ...e, surface: { op: 'replace', start, end }, sources });
const retract = (start, end) => ({ type: 'surface/retract', time: 5, data: {}, surface: { op: 'retract', start, end } });
const seqs = async (evs, opts) => (await fold(session(evs), opts)).messages.map((m) => m.seq);
const foldErr = async (evs) => runCommand('fold', session(evs));

const SPEC = fileURLToPath(new URL('../../jsonltape-v1.md', import.meta.url));
const EXAMPLE = (() => {
  const md = readFileSync(SPEC, 'utf8');
  const i = md.indexOf('## 2. A complete example');
  const start = md.indexOf('```\n', i) + 4;
  return Buffer.from(md.slice(start, md.indexOf('\n```', start)) + '\n');
})();

test('§2 example folds to its four messages, with the request header', async () => {
  const r = await fold(EXAMPLE);
  assert.equal(r.session, '01KB7X3M0000000000000000AB');
  assert.equal(r.seq, 13);
  assert.deepEqual(r.header, { model: 'gpt-5', provider: 'openai', system: 'You are a careful coding agent.' });
  assert.deepEqual(r.messages.map((m) => [m.seq, m.type]), [[3, 'user/message'], [5, 'assistant/message'], [8, 'tool/result'], [10, 'assistant/message']]);
  assert.deepEqual(Object.keys(r.messages[2]), ['seq', 'time', 'type', 'message', 'call_id']);
  // time travel: as of seq 6 the model had seen the user message and the call
  assert.deepEqual((await fold(EXAMPLE, { at: 6 })).messages.map((m) => m.seq), [3, 5]);
  await assert.rejects(fold(EXAMPLE, { at: 99 }), { code: 'no-such-seq' });
});

test('append, replace in place, retract (§8.6)', async () => {
  assert.deepEqual(await seqs([user('u1'), user('u2'), user('u3'), replace(user('x'), 2, 3, [2, 3]), user('u5')]), [1, 4, 5]);
  assert.deepEqual(await seqs([user('u1'), user('u2'), user('u3'), retract(1, 2)]), [3]);
  // a missing surface reads as append
  const { surface, ...bare } = user('u1');
  assert.deepEqual(await seqs([bare]), [1]);
  // S may be numerically greater than E once a replace moved a high seq early
  assert.deepEqual(await seqs([user('a'), user('b'), user('c'), replace(user('x'), 1, 1, [1]), replace(user('y'), 4, 2, [4, 2])]), [5, 3]);
});

test('surface errors: range not on the surface, start after end, surface on other types', async () => {
  assert.deepEqual(await foldErr([user('a'), user('b'), retract(2, 1)]), { error: 'invalid-event', line: 4 });
  assert.deepEqual(await foldErr([user('a'), replace(user('b'), 1, 1, [1]), retract(1, 1)]), { error: 'invalid-event', line: 4 });
  assert.deepEqual(await foldErr([{ type: 'turn/start', time: 1, data: {}, surface: 'append' }]), { error: 'invalid-event', line: 2 });
  assert.deepEqual(await foldErr([user('a'), { ...retract(1, 1), surface: 'append' }]), { error: 'invalid-event', line: 3 });
  assert.deepEqual(await foldErr([user('a'), { ...user('b'), surface: { op: 'retract', start: 1, end: 1 } }]), { error: 'invalid-event', line: 3 });
  // a replace must list every removed seq in sources
  assert.deepEqual(await foldErr([user('a'), user('b'), replace(user('x'), 1, 2, [1])]), { error: 'invalid-event', line: 4 });
  assert.deepEqual(await foldErr([user('a'), { type: 'session/start', time: 1, data: {} }]), { error: 'invalid-event', line: 3 });
});

test('tool calls stay paired with their results (§8.7.2)', async () => {
  // retracting an assistant message takes its answered results along
  assert.deepEqual(await seqs([user('u'), asst('a', ['c1']), result('c1'), asst('b', [], 'done'), retract(2, 2)]), [1, 4]);
  // ... unless the call is still declared by another current assistant message
  assert.deepEqual(await seqs([user('u'), asst('a', ['c1']), result('c1'), asst('b', ['c1']), retract(2, 2)]), [1, 3, 4]);
  // a revision that keeps the call id keeps the result; one that drops it takes it along
  assert.deepEqual(await seqs([user('u'), asst('a', ['c1']), result('c1'), replace(asst('a', ['c1'], 'v2'), 2, 2, [2])]), [1, 4, 3]);
  assert.deepEqual(await seqs([user('u'), asst('a', ['c1']), result('c1'), replace(asst('a', [], 'v2'), 2, 2, [2, 3])]), [1, 4]);
  assert.deepEqual(await foldErr([user('u'), asst('a', ['c1']), result('c1'), replace(asst('a', [], 'v2'), 2, 2, [2])]), { error: 'invalid-event', line: 5 });
  // removing a result whose call stays declared is refused; removing a lone result too
  assert.deepEqual(await foldErr([user('u'), asst('a', ['c1']), result('c1'), user('v'), retract(3, 4)]), { error: 'invalid-event', line: 6 });
  assert.deepEqual(await foldErr([user('u'), asst('a', ['c1']), result('c1'), retract(3, 3)]), { error: 'invalid-event', line: 5 });
  // ... but a second result for the same call keeps it answered
  assert.deepEqual(await seqs([user('u'), asst('a', ['c1']), result('c1'), user('v'), result('c1'), retract(3, 4)]), [1, 2, 5]);
  // in-place result revision, and the prune stub; another call id is refused
  assert.deepEqual(await seqs([asst('a', ['c1']), result('c1'), replace(result('c1'), 2, 2, [2])]), [1, 3]);
  assert.deepEqual(await foldErr([asst('a', ['c1']), result('c1'), replace(result('c2'), 2, 2, [2])]), { error: 'invalid-event', line: 4 });
  assert.deepEqual(await foldErr([asst('a', ['c1']), result('c1'), replace(user('x'), 2, 2, [2])]), { error: 'invalid-event', line: 4 });
  // a replace of several nodes may swallow results whole (a compaction)
  assert.deepEqual(await seqs([user('u'), asst('a', ['c1']), result('c1'), asst('b', [], 'x'), replace(user('sum'), 2, 4, [2, 3, 4])]), [1, 5]);
});

test('statuses and all versions: superseded, compacted, retracted (§8.7.2-§8.7.4)', async () => {
  const evs = [
    user('u1'), asst('a2', [], 'hi'), user('u3'),
    { type: 'compaction/start', time: 5, data: { start: 1, end: 2 } },
    { type: 'compaction/summary', time: 5, data: { compaction: 4, summary: 'sum', start: 1, end: 2, count: 2, chars: 3, shadowed_chars: 7 } },
    replace(user('s', 'sum'), 1, 2, [5, 1, 2]),
    { type: 'compaction/end', time: 5, data: { compaction: 4, message: 6 } },
    replace(user('u3b'), 3, 3, [3]),
    retract(8, 8),
  ];
  const r = await fold(session(evs), { allVersions: true });
  assert.deepEqual(r.messages.map((m) => m.seq), [6]);
  assert.deepEqual(r.versions.map((v) => [v.seq, v.status, v.by ?? null]), [
    [1, 'compacted', 6], [2, 'compacted', 6], [3, 'superseded', 8], [6, 'current', null], [8, 'retracted', 9],
  ]);
});

test('data shapes are checked for the types folding reads (§8.7.1 step 4)', async () => {
  const bad = [
    { type: 'user/message', time: 1, data: { message: { id: 'u', role: 'assistant', parts: [] } }, surface: 'append' },
    { type: 'user/message', time: 1, data: { message: { id: 'u', role: 'user', parts: [{ type: 'text', content: 5 }] } }, surface: 'append' },
    { type: 'tool/result', time: 1, data: { call_id: 'c', message: { id: 'r', role: 'tool', parts: [] } }, surface: 'append' },
    { type: 'compaction/summary', time: 1, data: { compaction: 1, summary: '  ', start: 1, end: 1, count: 1, chars: 2, shadowed_chars: 1 } },
    { type: 'todo/write', time: 1, data: { todos: [{ content: 'x', status: 'done' }] } },
    { type: 'request/header', time: 1, data: { tools: {} } },
    { type: 'fork/merge', time: 1, data: { fork: 'f' } },
  ];
  for (const e of bad) assert.deepEqual(await foldErr([e]), { error: 'invalid-event', line: 2 }, e.type);
  // unknown part types and unknown members are kept as they are
  const odd = { type: 'user/message', time: 1, data: { message: { id: 'u', role: 'user', parts: [{ type: 'x-new', v: 1 }], 'x-m': 1 } }, surface: 'append' };
  assert.deepEqual((await fold(session([odd]))).messages[0].message, odd.data.message);
  // types folding does not read are not checked
  assert.deepEqual(await seqs([{ type: 'turn/end', time: 1, data: { reason: 'whatever' } }]), []);
});

test('unknown types (§9): ignorable ones are skipped, others refuse the fold', async () => {
  assert.deepEqual(await seqs([{ type: 'com.example/x', time: 1, data: {}, ignorable: true }, user('u'), { type: 'assistant/chunk', time: 1, data: {} }]), [2]);
  assert.deepEqual(await foldErr([user('u'), { type: 'com.example/x', time: 1, data: {} }]), { error: 'unknown-type', type: 'com.example/x', line: 3 });
  assert.deepEqual(await foldErr([{ type: 'import/thing', time: 1, data: {} }]), { error: 'unknown-type', type: 'import/thing', line: 2 });
});

test('neutral items (§8.7.10): tool results carry call_id, error and synthetic when set; origin', async () => {
  const r = await fold(session([
    asst('a', ['c1', 'c2']),
    result('c1', { error: { code: 'X' }, synthetic: true }),
    result('c2', { synthetic: false, error: null }),
    { ...user('m'), data: { ...user('m').data, origin: { session: 'f', seq: 4 } } },
  ]));
  assert.deepEqual(r.messages.map((m) => Object.keys(m)), [
    ['seq', 'time', 'type', 'message'],
    ['seq', 'time', 'type', 'message', 'call_id', 'error', 'synthetic'],
    ['seq', 'time', 'type', 'message', 'call_id'],
    ['seq', 'time', 'type', 'message', 'origin'],
  ]);
});

test('forks by reference (§8.7.8): inherited nodes, checks on the parent', async () => {
  const parent = session([user('p1'), asst('p2', [], 'x'), user('p3')], { id: 'P' });
  const crcOf = (seq) => JSON.parse(parent.toString().split('\n')[seq]).crc;
  const forkOf = (p, evs, id = 'F') => session(evs, { id, parent: p });
  const resolveParent = ({ session: sid }) => ({ P: parent }[sid] ?? null);
  const f = forkOf({ session: 'P', seq: 2, crc: crcOf(2) }, [user('f1')]);
  const r = await fold(f, { resolveParent });
  assert.deepEqual(r.messages.map((m) => [m.session ?? r.session, m.seq]), [['P', 1], ['P', 2], ['F', 1]]);
  // a fork cannot touch inherited nodes: its seqs are its own
  await assert.rejects(fold(forkOf({ session: 'P', seq: 2 }, [user('f1'), retract(2, 2)]), { resolveParent }), { code: 'invalid-event' });
  await assert.rejects(fold(forkOf({ session: 'P', seq: 2, crc: '00000000' }, []), { resolveParent }), { code: 'parent-changed' });
  await assert.rejects(fold(forkOf({ session: 'P', seq: 9 }, []), { resolveParent }), { code: 'parent-changed' });
  await assert.rejects(fold(forkOf({ session: 'Q', seq: 1 }, []), { resolveParent }), { code: 'parent-not-found' });
  // a fork of a fork; and a chain that loops
  const ff = forkOf({ session: 'F', seq: 1 }, [user('g1')], 'G');
  const r2 = await fold(ff, { resolveParent: ({ session: sid }) => ({ P: parent, F: f }[sid]) });
  assert.deepEqual(r2.messages.map((m) => m.session ?? 'G'), ['P', 'P', 'F', 'G']);
  const loop = forkOf({ session: 'L', seq: 0 }, [], 'L');
  await assert.rejects(fold(loop, { resolveParent: () => loop }), { code: 'fork-cycle' });
  // from stdin the parent cannot be found
  assert.deepEqual(await runCommand('fold', f), { error: 'parent-not-found' });
});

test('fold refuses damaged files like read does', async () => {
  assert.deepEqual(await runCommand('fold', Buffer.alloc(0)), { error: 'not-jsonltape' });
  const good = session([user('a'), { type: 'session/flush', time: 1, data: { offset: 0, seq: 1 }, ignorable: true }]);
  const bad = Buffer.from(good);
  bad[good.indexOf('"a"') + 1] = 0x62; // damage line 2, a session/flush witness follows
  assert.deepEqual(await runCommand('fold', bad), { error: 'corrupt' });
  // a torn tail is not folded
  assert.deepEqual((await fold(Buffer.concat([session([user('a')]), Buffer.from('{"seq":2,"type":"user/mes')]))).messages.length, 1);
});
