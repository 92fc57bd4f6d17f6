#!/usr/bin/env node
// jsonltape.mjs — an independent reader for the jsonltape v1 session-log format, written from
// spec/jsonltape-v1.md alone (Node.js 20+, no dependencies). Library (ES module) and CLI:
//   node jsonltape.mjs checksum|read|verify|repair|fold < input     (conformance protocol)
import { createReadStream } from 'node:fs';
import { Buffer } from 'node:buffer';
import { fileURLToPath } from 'node:url';
import { realpathSync } from 'node:fs';

// ---------------------------------------------------------------------------------------------
// §5 CRC-32 (ISO-HDLC / zlib): reflected polynomial 0xEDB88320, init and final XOR 0xFFFFFFFF.
const CRC_TABLE = new Uint32Array(256);
for (let n = 0; n < 256; n++) {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  CRC_TABLE[n] = c >>> 0;
}

/** CRC-32 of bytes[start:end], continuing from `crc` (the CRC of the bytes before; 0 at first). */
export function crc32(bytes, crc = 0, start = 0, end = bytes.length) {
  let c = (crc ^ 0xffffffff) >>> 0;
  for (let i = start; i < end; i++) c = CRC_TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

export const hex8 = (n) => n.toString(16).padStart(8, '0');

// ---------------------------------------------------------------------------------------------
// Strict RFC 8259 JSON, iterative (no recursion limit). Integers outside ±(2^53-1) become BigInt
// so nothing is lost; members whose number had a fraction or exponent ("1.0", "1e3") are
// remembered so that "integer" checks (§6, §10.2) can tell 1.0 from 1. A number no double can
// hold (1e400, or an integer of 400 digits) is refused wherever it is (§4, I-JSON).
const FLOAT_MEMBERS = new WeakMap();

/** True when container[key] is a JSON integer (written without fraction or exponent). */
export function isInteger(container, key) {
  const v = container?.[key];
  if (typeof v === 'bigint') return true;
  if (typeof v !== 'number' || !Number.isInteger(v)) return false;
  return !FLOAT_MEMBERS.get(container)?.has(key);
}

const isPlainObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

function setMember(obj, key, value) {
  if (key === '__proto__') {
    Object.defineProperty(obj, key, { value, writable: true, enumerable: true, configurable: true });
  } else obj[key] = value;
}

export class JsonError extends Error {}

/**
 * Parse strict JSON. With `spans` (a Map), every object and array is mapped to [start, end):
 * where its text starts and ends in `text` (a branch/event's recorded line is checked as the
 * bytes it was stored as, §8.7.14).
 */
export function parseJson(text, spans = null) {
  let i = 0;
  const n = text.length;
  const fail = (msg) => { throw new JsonError(`${msg} at character ${i}`); };
  const ws = () => {
    for (; i < n; i++) {
      const c = text.charCodeAt(i);
      if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) break;
    }
  };
  const str = () => { // text[i] is the opening quote
    i++;
    let out = '';
    let run = i;
    for (;;) {
      if (i >= n) fail('unterminated string');
      const c = text.charCodeAt(i);
      if (c === 0x22) { out += text.slice(run, i); i++; return out; }
      if (c < 0x20) fail('control character in string');
      if (c !== 0x5c) { i++; continue; }
      out += text.slice(run, i);
      const e = text[i + 1];
      i += 2;
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          const h = text.slice(i, i + 4);
          if (!/^[0-9a-fA-F]{4}$/.test(h)) fail('bad \\u escape');
          const u = parseInt(h, 16);
          i += 4;
          // Lone surrogates are refused (I-JSON, RFC 7493 §2.1): text must be valid Unicode.
          if (u >= 0xdc00 && u <= 0xdfff) fail('lone low surrogate');
          if (u >= 0xd800 && u <= 0xdbff) {
            const lo = text.slice(i, i + 6);
            if (!/^\\u[dD][c-fC-F][0-9a-fA-F]{2}$/.test(lo)) fail('lone high surrogate');
            out += String.fromCharCode(u, parseInt(lo.slice(2), 16));
            i += 6;
          } else out += String.fromCharCode(u);
          break;
        }
        default: i -= 2; fail('bad escape');
      }
      run = i;
    }
  };
  const NUM = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/y;
  // Returns [value, isFloatLexeme] for a scalar at i.
  const scalar = () => {
    const c = text[i];
    if (c === '"') return [str(), false];
    if (text.startsWith('true', i)) { i += 4; return [true, false]; }
    if (text.startsWith('false', i)) { i += 5; return [false, false]; }
    if (text.startsWith('null', i)) { i += 4; return [null, false]; }
    NUM.lastIndex = i;
    const m = NUM.exec(text);
    if (!m) fail('unexpected character');
    i = NUM.lastIndex;
    if (m[1] === undefined && m[2] === undefined) {
      const v = Number(m[0]);
      if (!Number.isFinite(v)) fail('number out of range'); // 1 followed by 400 zeros (§4)
      return [Number.isSafeInteger(v) ? v : BigInt(m[0]), false];
    }
    const v = Number(m[0]);
    if (!Number.isFinite(v)) fail('number out of range'); // 1e400: JSON cannot carry infinity (§6)
    return [v, true];
  };
  // Iterative descent: a stack of open containers.
  const stack = []; // {c: container, key?: pending member name, start: where its text starts}
  const closed = (top) => { if (spans) spans.set(top.c, [top.start, i]); };
  let root;
  let haveRoot = false;
  const put = (v, isFloat) => {
    if (stack.length === 0) { root = v; haveRoot = true; return; }
    const top = stack[stack.length - 1];
    let k;
    if (Array.isArray(top.c)) { k = top.c.length; top.c.push(v); } else { k = top.key; setMember(top.c, k, v); }
    if (isFloat) {
      let s = FLOAT_MEMBERS.get(top.c);
      if (!s) FLOAT_MEMBERS.set(top.c, (s = new Set()));
      s.add(k);
    } else if (!Array.isArray(top.c)) FLOAT_MEMBERS.get(top.c)?.delete(k); // duplicate key: last wins
  };
  // State machine: expect a value, then after a value either ',' or a closer.
  ws();
  for (;;) {
    // --- expect a value
    if (i >= n) fail('unexpected end');
    const c = text[i];
    if (c === '{' || c === '[') {
      i++;
      const container = c === '{' ? {} : [];
      put(container, false);
      stack.push({ c: container, key: undefined, start: i - 1 });
      ws();
      if (text[i] === (c === '{' ? '}' : ']')) { i++; closed(stack.pop()); }
      else {
        if (c === '{') {
          if (text[i] !== '"') fail('expected member name');
          stack[stack.length - 1].key = str();
          ws();
          if (text[i] !== ':') fail("expected ':'");
          i++;
          ws();
        }
        continue;
      }
    } else {
      const [v, isFloat] = scalar();
      put(v, isFloat);
    }
    // --- after a value: close containers or move to the next element
    for (;;) {
      ws();
      if (stack.length === 0) {
        if (i !== n) fail('trailing characters');
        if (!haveRoot) fail('no value');
        return root;
      }
      const top = stack[stack.length - 1];
      const isArr = Array.isArray(top.c);
      if (text[i] === ',') {
        i++;
        ws();
        if (!isArr) {
          if (text[i] !== '"') fail('expected member name');
          top.key = str();
          ws();
          if (text[i] !== ':') fail("expected ':'");
          i++;
          ws();
        }
        break; // expect the next value
      }
      if (text[i] === (isArr ? ']' : '}')) { i++; closed(stack.pop()); continue; }
      fail(isArr ? "expected ',' or ']'" : "expected ',' or '}'");
    }
  }
}

/** Serialize a parsed value (BigInt included) as compact JSON. Iterative. */
export function stringifyJson(value) {
  const out = [];
  const stack = [{ v: value, keys: null, i: -1 }];
  while (stack.length) {
    const f = stack[stack.length - 1];
    const v = f.v;
    if (v === null || typeof v !== 'object') {
      stack.pop();
      if (typeof v === 'bigint') out.push(v.toString());
      else if (typeof v === 'number') out.push(Number.isFinite(v) ? JSON.stringify(v) : 'null');
      else if (v === undefined) out.push('null');
      else out.push(JSON.stringify(v));
      continue;
    }
    const arr = Array.isArray(v);
    if (f.i === -1) { out.push(arr ? '[' : '{'); f.keys = arr ? null : Object.keys(v); }
    f.i++;
    const len = arr ? v.length : f.keys.length;
    if (f.i >= len) { out.push(arr ? ']' : '}'); stack.pop(); continue; }
    if (f.i > 0) out.push(',');
    if (arr) stack.push({ v: v[f.i], keys: null, i: -1 });
    else {
      const k = f.keys[f.i];
      out.push(JSON.stringify(k), ':');
      stack.push({ v: v[k], keys: null, i: -1 });
    }
  }
  return out.join('');
}

// ---------------------------------------------------------------------------------------------
// Byte sources and lines (§4). Lines are split on 0x0A in raw bytes; offsets count bytes.

async function* chunksOf(source) {
  if (typeof source === 'string' || source instanceof URL) {
    yield* createReadStream(source, { highWaterMark: 1 << 20 });
  } else if (source instanceof Uint8Array) {
    yield source;
  } else if (source && (source[Symbol.asyncIterator] || source[Symbol.iterator])) {
    for await (const c of source) yield typeof c === 'string' ? Buffer.from(c, 'utf8') : c;
  } else throw new TypeError('source must be a path, a Uint8Array or an iterable of chunks');
}

/** Yields {index, offset, bytes, complete} for every line; `bytes` includes the final \n. */
export async function* lines(source) {
  let pending = [];
  let pendingLen = 0;
  let offset = 0;
  let index = 0;
  for await (const chunk0 of chunksOf(source)) {
    const chunk = Buffer.isBuffer(chunk0) ? chunk0 : Buffer.from(chunk0.buffer, chunk0.byteOffset, chunk0.byteLength);
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(0x0a, start);
      if (nl < 0) break;
      let bytes = chunk.subarray(start, nl + 1);
      if (pendingLen) { pending.push(bytes); bytes = Buffer.concat(pending, pendingLen + bytes.length); pending = []; pendingLen = 0; }
      yield { index, offset, bytes, complete: true };
      offset += bytes.length;
      index++;
      start = nl + 1;
    }
    if (start < chunk.length) { const rest = chunk.subarray(start); pending.push(Buffer.from(rest)); pendingLen += rest.length; }
  }
  if (pendingLen) yield { index, offset, bytes: Buffer.concat(pending, pendingLen), complete: false };
}

const SUFFIX_HEAD = Buffer.from(',"crc":"');
const HEX = new Uint8Array(256);
for (const c of '0123456789abcdef') HEX[c.charCodeAt(0)] = 1;
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

// §6 ranges of the envelope (and of the header's created, §7).
export const MAX_SEQ = Number.MAX_SAFE_INTEGER; // 2^53 - 1
export const MAX_TIME = 253402300799999; // 9999-12-31T23:59:59.999Z

/** container[key] is an integer in 0 ... max (a BigInt is beyond every range here). */
const inRange = (container, key, max) =>
  isInteger(container, key) && typeof container[key] === 'number' && container[key] >= 0 && container[key] <= max;

/**
 * §4 + §5 + §6 + §10.2: is this line good? Returns {good: true, event} or {good: false, reason}.
 * A good line starts with {, ends in \n, has the 18-byte checksum suffix with a matching CRC-32
 * of every byte before it, is valid UTF-8 throughout and JSON whose every string and member name
 * (unknown members included, at any level) is Unicode text (I-JSON: no lone surrogates) and
 * whose every number a double holds (no 1e400), and is an object with integer seq in
 * 0 ... 2^53-1 (= its index, unless `anySeq`), string type, integer time in 0 ... MAX_TIME,
 * object data and optional envelope members of the §6 types and ranges. With `skipCrc` every
 * check but the CRC comparison is made (for lines a matching span covers, §10.2).
 */
export function checkLine(rec, { anySeq = false, skipCrc = false } = {}) {
  const b = rec.bytes;
  if (!rec.complete) return { good: false, reason: 'no newline at end of line (not committed)' };
  const n = b.length;
  if (n < 19) return { good: false, reason: 'line too short for the crc suffix' };
  if (b[0] !== 0x7b) return { good: false, reason: 'line does not start with {' };
  if (b.compare(SUFFIX_HEAD, 0, 8, n - 19, n - 11) !== 0 || b[n - 3] !== 0x22 || b[n - 2] !== 0x7d) {
    return { good: false, reason: 'no crc suffix' };
  }
  for (let k = n - 11; k < n - 3; k++) if (!HEX[b[k]]) return { good: false, reason: 'crc is not 8 lowercase hex digits' };
  if (!skipCrc) {
    const bad = crcProblem(rec);
    if (bad) return { good: false, reason: bad };
  }
  let ev;
  try {
    // Every byte of the line is decoded and parsed: a bad byte or number in an unknown member
    // (its name included) makes the line bad like one in data (§4).
    ev = parseJson(utf8.decode(b.subarray(0, n - 1)));
  } catch (e) {
    return { good: false, reason: e instanceof JsonError ? `invalid JSON: ${e.message}` : 'invalid UTF-8' };
  }
  if (!isPlainObject(ev)) return { good: false, reason: 'not a JSON object' };
  if (!isInteger(ev, 'seq')) return { good: false, reason: 'seq is not an integer' };
  if (!inRange(ev, 'seq', MAX_SEQ)) return { good: false, reason: 'seq is outside 0 ... 2^53-1' };
  if (typeof ev.type !== 'string') return { good: false, reason: 'type is not a string' };
  if (!isInteger(ev, 'time')) return { good: false, reason: 'time is not an integer' };
  if (!inRange(ev, 'time', MAX_TIME)) return { good: false, reason: 'time is outside 0 ... 253402300799999' };
  if (!isPlainObject(ev.data)) return { good: false, reason: 'data is not an object' };
  const bad = envelopeProblem(ev);
  if (bad) return { good: false, reason: bad };
  if (!anySeq && ev.seq !== rec.index) return { good: false, reason: `seq ${ev.seq} where ${rec.index} was expected` };
  if (ev.type === 'branch/start' || ev.type === 'branch/event') {
    const problem = branchProblem(ev, b);
    if (problem) return { good: false, reason: problem };
  }
  return { good: true, event: ev };
}

// §8.7.14 (1.2): the branch records of a merge have a shape every reader checks with the line.
const CRC8 = /^[0-9a-f]{8}$/;
const SHA256 = /^[0-9a-f]{64}$/;
const isCrc = (v) => typeof v === 'string' && CRC8.test(v);
const NEVER_RECORDED = new Set(['session/flush', 'branch/start', 'branch/event']);
const NEWLINE = Buffer.from('\n');

/** Why a branch/start or branch/event (a good envelope, its line `bytes`) breaks §8.7.14, or null. */
function branchProblem(ev, bytes) {
  const d = ev.data;
  if (ev.ignorable !== true || ev.surface != null) return `${ev.type}: always ignorable, never on the surface`;
  if (ev.type === 'branch/start') {
    if (!['at', 'head', 'count'].every((k) => inRange(d, k, MAX_SEQ))) return 'branch/start: at, head and count must be integers in 0 ... 2^53-1';
    if (!isCrc(d.crc) || !Array.isArray(d.lines) || !d.lines.every(isCrc)) return 'branch/start: crc and every item of lines must be 8 lowercase hex digits';
    if (d.source != null && typeof d.source !== 'string') return 'branch/start: source must be a string';
    if (d.sha256 != null && !(Array.isArray(d.sha256) && d.sha256.every((h) => typeof h === 'string' && SHA256.test(h)))) {
      return 'branch/start: sha256 must be an array of 64 lowercase hex digits each';
    }
    if (!(d.at < d.head) || d.at >= ev.seq) return 'branch/start: at must come before head and before the receipt';
    if (d.lines.length !== d.head - d.at || d.lines[d.lines.length - 1] !== d.crc) return 'branch/start: lines must name at+1 ... head, the last one being crc';
    if (d.sha256 != null && d.sha256.length !== d.lines.length) return 'branch/start: sha256 must have one item per item of lines';
    return null;
  }
  const o = d.origin;
  if (!inRange(d, 'branch', MAX_SEQ) || !isPlainObject(o) || !inRange(o, 'seq', MAX_SEQ) || !isCrc(o.crc) || !isPlainObject(d.line)) {
    return 'branch/event: needs branch (a seq), origin {seq, crc} and line (an object)';
  }
  if (d.branch >= ev.seq) return 'branch/event: branch must name an earlier line';
  if (typeof d.line.type === 'string' && NEVER_RECORDED.has(d.line.type)) return `branch/event: a merge never records a ${d.line.type} line`;
  // The recorded line is the bytes of data.line as stored: parse again, noting where it lies.
  const spans = new Map();
  const text = utf8.decode(bytes.subarray(0, bytes.length - 1));
  const again = parseJson(text, spans);
  const [start, end] = spans.get(again.data.line);
  const raw = Buffer.from(text.slice(start, end), 'utf8');
  const r = checkLine({ bytes: Buffer.concat([raw, NEWLINE]), complete: true, index: 0 }, { anySeq: true });
  if (!r.good) return `branch/event: the recorded line is not a good line: ${r.reason}`;
  if (r.event.seq !== o.seq || raw.toString('latin1', raw.length - 10, raw.length - 2) !== o.crc) {
    return "branch/event: origin must be the recorded line's seq and crc";
  }
  return null;
}

/** §5: null when the line's own CRC matches its suffix, else the reason (the suffix is framed). */
function crcProblem(rec) {
  const b = rec.bytes;
  const n = b.length;
  const got = crc32(b, 0, 0, n - 19);
  return got === parseInt(b.toString('latin1', n - 11, n - 3), 16) ? null : `crc mismatch (computed ${hex8(got)})`;
}

/**
 * §6: optional envelope members, when present, have the types of the table; surface, sources
 * and key may be null (= absent). surface is one of the three forms of §8.6; its start and end
 * and the items of sources are seqs, integers in 0 ... 2^53-1.
 */
function envelopeProblem(ev) {
  const { surface: s, sources, key } = ev;
  if (s != null && s !== 'append' && !(isPlainObject(s) && (s.op === 'replace' || s.op === 'retract') && inRange(s, 'start', MAX_SEQ) && inRange(s, 'end', MAX_SEQ))) {
    return 'surface is not "append", {"op":"replace",start,end} or {"op":"retract",start,end} with start and end in 0 ... 2^53-1';
  }
  if (sources != null && !(Array.isArray(sources) && sources.every((_, i) => inRange(sources, i, MAX_SEQ)))) return 'sources is not an array of integers in 0 ... 2^53-1';
  if (key != null && typeof key !== 'string') return 'key is not a string';
  if (ev.ignorable !== undefined && typeof ev.ignorable !== 'boolean') return 'ignorable is not a boolean';
  return null;
}

/**
 * §10.2: a valid checkpoint is a good session/flush line whose data has the shape of §8.5
 * (integer offset and seq; turn absent, null or {seq, offset} integers; closed a boolean if
 * present; span, format 1.1, absent, null or an object with integer `from` in 0 ... offset and
 * `crc` of 8 lowercase hex digits) and whose data.offset is its own offset.
 */
export const isValidCheckpoint = (ev, offset) => {
  const d = ev.data;
  if (ev.type !== 'session/flush' || !isInteger(d, 'offset') || !isInteger(d, 'seq')) return false;
  if (d.turn != null && !(isPlainObject(d.turn) && isInteger(d.turn, 'seq') && isInteger(d.turn, 'offset'))) return false;
  if (d.closed !== undefined && typeof d.closed !== 'boolean') return false;
  if (d.span != null && !isSpan(d.span, d.offset)) return false; // null reads as absent, as for turn
  return d.offset === offset;
};

const SPAN_CRC = /^[0-9a-f]{8}$/;
/** §8.5 span shape: {from: integer 0 ... offset, crc: "xxxxxxxx"}; other members are allowed. */
const isSpan = (s, offset) =>
  isPlainObject(s) && isInteger(s, 'from') && s.from >= 0 && s.from <= offset && typeof s.crc === 'string' && SPAN_CRC.test(s.crc);

export class TapeError extends Error {
  constructor(code, message, extra = {}) { super(message); this.code = code; Object.assign(this, extra); }
}

/** §7: the header checks. Returns null when fine, else a TapeError. */
function checkHeader(first) {
  if (!first) return new TapeError('not-jsonltape', 'empty file');
  const r = checkLine(first);
  if (!r.good) return new TapeError('not-jsonltape', `line 1 is not a good line: ${r.reason}`);
  const ev = r.event;
  if (ev.type !== 'session/start' || ev.data.format !== 'jsonltape') {
    return new TapeError('not-jsonltape', 'line 1 is not a jsonltape session/start header');
  }
  if (!isInteger(ev.data, 'version') || ev.data.version < 1) {
    return new TapeError('unsupported-version', `unsupported format version ${stringifyJson(ev.data.version ?? null)}`);
  }
  if (ev.data.version > 1) {
    return new TapeError('unsupported-version', `written by a newer version of the format (major ${ev.data.version}); this reader implements 1`);
  }
  const bad = headerProblem(ev.data);
  return bad ? new TapeError('not-jsonltape', `bad header: ${bad}`) : null;
}

// §7: a header that lacks id or created, or gives any member of its table the wrong type, is
// not a session header. A member present with the value null has the wrong type (null is not a
// string, an integer or an object); only the envelope's surface, sources and key may be null.
const has = (o, k) => Object.prototype.hasOwnProperty.call(o, k);
function headerProblem(d) {
  if (typeof d.id !== 'string') return '$.data.id must be a string';
  if (!inRange(d, 'created', MAX_TIME)) return '$.data.created must be an integer in 0 ... 253402300799999';
  if (has(d, 'minor') && !isInteger(d, 'minor')) return '$.data.minor must be an integer';
  for (const k of ['title', 'cwd', 'agent']) {
    if (has(d, k) && typeof d[k] !== 'string') return `$.data.${k} must be a string`;
  }
  if (has(d, 'parent')) {
    const p = d.parent;
    if (!isPlainObject(p) || typeof p.session !== 'string' || !inRange(p, 'seq', MAX_SEQ)) {
      return '$.data.parent must be {session: string, seq: integer in 0 ... 2^53-1, path?, crc?}';
    }
    for (const k of ['path', 'crc']) {
      if (has(p, k) && typeof p[k] !== 'string') return `$.data.parent.${k} must be a string`;
    }
  }
  if (has(d, 'meta') && !isPlainObject(d.meta)) return '$.data.meta must be an object';
  return null;
}

// ---------------------------------------------------------------------------------------------
// Turn bookkeeping for classification (§10.2) and repair closers (§10.3).

class TurnTracker {
  constructor() { this.turn = null; this.last = null; }
  push(ev, offset) {
    const d = ev.data;
    this.last = ev;
    this.lastValidCheckpoint = isValidCheckpoint(ev, offset);
    if (ev.type === 'turn/start') {
      this.turn = { seq: ev.seq, calls: new Map(), results: new Set(), step: null };
      return;
    }
    const t = this.turn;
    if (!t) return;
    switch (ev.type) {
      case 'turn/end': this.turn = null; break;
      case 'step/start': t.step = ev.seq; break;
      case 'step/end': t.step = null; break; // any step/end closes the open step, as turn/end does
      case 'assistant/message':
        for (const p of Array.isArray(d.message?.parts) ? d.message.parts : []) {
          if (isPlainObject(p) && p.type === 'tool_call' && typeof p.id === 'string' && !t.calls.has(p.id)) {
            t.calls.set(p.id, null);
          }
        }
        break;
      case 'tool/call':
        if (typeof d.call_id === 'string') {
          t.calls.set(d.call_id, ev.seq); // keeps the order of first appearance; the latest tool/call wins
        }
        break;
      case 'tool/result':
        if (typeof d.call_id === 'string') t.results.add(d.call_id);
        break;
    }
  }
  /** Open turn left by a crash: a turn is open and the last line is not a closing checkpoint. */
  get crashedOpen() {
    return this.turn !== null && !(this.lastValidCheckpoint && this.last.data.closed === true);
  }
}

export const TEXT_OUTCOME_UNKNOWN =
  'The tool call was interrupted after it was recorded, but no result was durably recorded. ' +
  'Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the ' +
  'operation is read-only or idempotent; if it may have side effects, first verify external ' +
  'state or ask the user. Do not retry blindly.';
export const TEXT_NOT_STARTED =
  'The tool call was interrupted before it was recorded as started. Retry it if it is still needed.';

function closersFor(tracker) {
  const t = tracker.turn;
  const out = [];
  for (const [id, callSeq] of t.calls) {
    if (t.results.has(id)) continue;
    const recorded = callSeq !== null;
    const text = recorded ? TEXT_OUTCOME_UNKNOWN : TEXT_NOT_STARTED;
    const c = {
      type: 'tool/result',
      data: {
        call_id: id,
        message: { id: `interrupted-${id}`, role: 'tool', parts: [{ type: 'tool_call_response', id, response: text, is_error: true }] },
        error: { code: recorded ? 'TOOL_OUTCOME_UNKNOWN' : 'TOOL_NOT_STARTED', message: text },
        synthetic: true,
      },
      surface: 'append',
    };
    if (recorded) c.sources = [callSeq];
    out.push(c);
  }
  if (t.step !== null) out.push({ type: 'step/end', data: { step: t.step, turn: t.seq, synthetic: true } });
  out.push({ type: 'turn/end', data: { turn: t.seq, reason: 'interrupted', synthetic: true } });
  return out;
}

// ---------------------------------------------------------------------------------------------
// The scan: one streaming pass that checks every line, finds B, tells torn tail from corruption
// and hands each committed event (good line before B) to `onEvent(event, rec)`.

/** How many bytes of lines the span check holds back before it checks them one by one. */
export const SPAN_HOLD_LIMIT = 16 << 20;

/**
 * The verdict of each line before B, in order: {rec, r} with r as checkLine's. With spans
 * (format 1.1, §8.5/§10.2), lines after a session/flush line are held, checked in everything
 * but their CRCs, until the next one: if it is good, a valid checkpoint, its span starts where
 * the held bytes start (just after the previous session/flush line or the header, as read) and
 * one CRC-32 of the held bytes equals span.crc, the held lines pass the checksum without their
 * own CRCs; otherwise (no span, a wrong from or crc, a bad checkpoint, held bytes over
 * `holdLimit`) each held line is checked by its own CRC. So no line is released as good before
 * a CRC vouched for it, and the verdicts are those of per-line checking on every file a
 * conforming writer wrote. push() returns the lines it releases (none while it holds);
 * drain() releases the rest at the end of the input.
 */
class LineChecker {
  constructor({ spans = true, holdLimit = SPAN_HOLD_LIMIT } = {}) {
    this.spans = spans;
    this.holdLimit = holdLimit;
    this.held = []; // {rec, r}: lines that passed every check but the CRC, all from flushEnd on
    this.heldBytes = 0;
    this.holding = spans; // false after an overflow, until the next session/flush line
    this.flushEnd = null; // the offset just after the previous session/flush line or the header
    this.vouched = 0; // lines that passed the checksum by a span, not by their own CRCs
  }

  push(rec) {
    if (!this.holding || rec.index === 0) {
      const r = checkLine(rec);
      if (r.good && (rec.index === 0 || r.event.type === 'session/flush')) this.restart(rec);
      return [{ rec, r }];
    }
    const r = checkLine(rec, { skipCrc: true });
    // A line bad for any other reason is bad whatever its CRC; the full check gives the reason
    // per-line checking gives (the CRC is compared before the JSON is parsed).
    if (!r.good) return this.release(false, { rec, r: checkLine(rec) });
    if (r.event.type !== 'session/flush') {
      this.held.push({ rec, r });
      this.heldBytes += rec.bytes.length;
      if (this.heldBytes <= this.holdLimit) return [];
      this.holding = false; // check what is held and go on line by line until a session/flush
      return this.release(false, null);
    }
    const own = crcProblem(rec); // a checkpoint's own CRC is always checked
    if (own) return this.release(false, { rec, r: { good: false, reason: own } });
    const out = this.release(this.spanMatches(r.event, rec), { rec, r });
    this.restart(rec);
    return out;
  }

  drain() { return this.release(false, null); }

  /** The checkpoint's span covers exactly the held bytes and their CRC-32 is span.crc. */
  spanMatches(ev, rec) {
    const span = ev.data.span;
    if (span == null || !isValidCheckpoint(ev, rec.offset) || span.from !== this.flushEnd) return false;
    let c = 0;
    for (const h of this.held) c = crc32(h.rec.bytes, c);
    return c === parseInt(span.crc, 16);
  }

  restart(rec) {
    this.flushEnd = rec.offset + rec.bytes.length;
    this.holding = this.spans;
  }

  /** The held lines (checked by their own CRCs unless `vouched`), then `last` if given. */
  release(vouched, last) {
    const out = this.held;
    if (!vouched) {
      for (const h of out) {
        const bad = crcProblem(h.rec);
        if (bad) h.r = { good: false, reason: bad };
      }
    } else this.vouched += out.length;
    if (last) out.push(last);
    this.held = [];
    this.heldBytes = 0;
    return out;
  }
}

/**
 * The scan as a generator: yields {event, rec} for each committed event and returns
 * {state, events, bad: {line, offset, reason}|null, witness, header, tracker, size, vouched}
 * (vouched: how many lines a span checked instead of their own CRCs). Options: `spans` (default true: use format 1.1 span checksums, see LineChecker; false checks
 * every line by its own CRC) and `holdLimit`. Throws TapeError('not-jsonltape' |
 * 'unsupported-version').
 */
export async function* walk(source, { spans = true, holdLimit = SPAN_HOLD_LIMIT } = {}) {
  const tracker = new TurnTracker();
  const checker = new LineChecker({ spans, holdLimit });
  let header = null;
  let bad = null; // first line that is not good: B
  let witness = null;
  let committed = 0;
  let size = 0;
  // §10.2 witness: a framed, checksummed envelope of type session/flush after B. Neither its
  // seq (a gap or a duplicated line shifts every later seq) nor its data.offset (a deleted or
  // merged line shifts every later offset) is compared.
  const lookForWitness = (rec) => {
    const r = checkLine(rec, { anySeq: true });
    if (r.good && r.event.type === 'session/flush') witness = { line: rec.index + 1, offset: rec.offset };
  };
  // The verdicts come in file order; the lines released after B (in the same batch) are only
  // looked at as possible witnesses.
  function* settle(verdicts) {
    for (const { rec, r } of verdicts) {
      if (bad === null) {
        if (r.good) {
          if (rec.index === 0) header = r.event;
          committed++;
          tracker.push(r.event, rec.offset);
          yield { event: r.event, rec };
          continue;
        }
        bad = { line: rec.index + 1, offset: rec.offset, reason: r.reason };
      } else if (witness === null) lookForWitness(rec);
    }
  }
  for await (const rec of lines(source)) {
    size = rec.offset + rec.bytes.length;
    if (rec.index === 0) {
      const err = checkHeader(rec);
      if (err) throw err;
    }
    if (bad === null) yield* settle(checker.push(rec));
    else if (witness === null) lookForWitness(rec);
  }
  if (bad === null) yield* settle(checker.drain());
  if (header === null) throw checkHeader(null);
  let state;
  if (bad === null) state = tracker.crashedOpen ? 'open-turn' : 'clean';
  else state = witness ? 'corrupt' : 'torn-tail';
  return { state, events: committed, bad, witness, header, tracker, size, vouched: checker.vouched };
}

/**
 * Scan a whole session, calling `onEvent(event, rec)` (may be async) for each committed event.
 * `spans` and `holdLimit` as for walk().
 */
export async function scan(source, { onEvent, ...opts } = {}) {
  const it = walk(source, opts);
  for (;;) {
    const { value, done } = await it.next();
    if (done) return value;
    if (onEvent) await onEvent(value.event, value.rec);
  }
}

/** §10.2 verify: {state, events, line, offset, reason}. Options as for walk(). */
export async function verify(source, opts = {}) {
  const r = await scan(source, opts);
  return { state: r.state, events: r.events, line: r.bad?.line ?? null, offset: r.bad?.offset ?? null, reason: r.bad?.reason ?? null };
}

const corruptError = (bad) =>
  new TapeError('corrupt', `line ${bad.line}, byte ${bad.offset}: ${bad.reason} (a witness checkpoint follows it: damage, not a crash)`, { line: bad.line, offset: bad.offset });

/**
 * Read the committed events (streaming, constant memory). Yields each good line before B as
 * soon as it is checked; after the last one, throws TapeError('corrupt') if a witness
 * follows B (the events already yielded are good lines, but the file as a whole is damaged).
 * The generator's return value is the scan result (state torn-tail / open-turn / clean).
 * Options as for walk(): with spans, the lines a checkpoint's span covers come when it is read.
 */
export async function* readEvents(source, opts = {}) {
  const it = walk(source, opts);
  for (;;) {
    const { value, done } = await it.next();
    if (done) {
      if (value.state === 'corrupt') throw corruptError(value.bad);
      return value;
    }
    yield value.event;
  }
}

/**
 * §10.3: what repair would do. {state, cut, kept, closers, time}: `cut` is the offset to truncate
 * to (B) or null, `closers` the synthesized events (without seq/time; their time would be `time`,
 * the last kept event's time), not counting the trailing checkpoint. Corrupt files are refused
 * (TapeError 'corrupt') unless `force`. Other options as for walk().
 */
export async function planRepair(source, { force = false, ...opts } = {}) {
  const r = await scan(source, opts);
  if (r.state === 'corrupt' && !force) {
    throw corruptError(r.bad);
  }
  // The tracker saw exactly the committed events, i.e. the file as it is after the cut.
  const closers = r.tracker.crashedOpen ? closersFor(r.tracker) : [];
  return { state: r.state, cut: r.bad ? r.bad.offset : null, kept: r.events, closers, time: r.tracker.last.time };
}


// ---------------------------------------------------------------------------------------------
// Folding (§8.6, §8.7): the surface, tool-call pairing, statuses, state folds, forks, and the
// neutral message form.

export class FoldError extends TapeError {}

const MODEL_VISIBLE = new Set(['user/message', 'assistant/message', 'tool/result']);
const ALWAYS_IGNORABLE = new Set(['session/flush', 'assistant/chunk']);
const COMPACTING = new Set(['compaction/summary', 'compaction/prune', 'handoff/anchor']);
export const KNOWN_TYPES = new Set([
  'session/start', 'session/flush', 'assistant/chunk', 'turn/start', 'turn/end', 'step/start',
  'step/end', 'user/message', 'assistant/message', 'tool/result', 'tool/call', 'todo/write',
  'request/header', 'surface/retract', 'compaction/start', 'compaction/summary', 'compaction/end',
  'compaction/prune', 'handoff/anchor', 'fork/merge', 'fork/discard',
]);

// --- data shapes (§8.2-§8.4, §8.7.13). Each checker returns null or "$.path: problem".
// Optional members may be absent; null is treated as absent (writers must omit them, §6).
const T = {
  str: (v) => typeof v === 'string',
  bool: (v) => typeof v === 'boolean',
  obj: isPlainObject,
  arr: Array.isArray,
  any: () => true,
};
const absent = (v) => v === undefined || v === null;
/** spec: {member: [test, required]}; `int` tests use isInteger on the container. */
function shape(o, spec, path) {
  if (!isPlainObject(o)) return `${path}: not an object`;
  for (const [k, [test, required]] of Object.entries(spec)) {
    if (absent(o[k])) { if (required) return `${path}.${k}: missing`; continue; }
    const ok = test === 'int' ? isInteger(o, k) && o[k] >= 0 : typeof test === 'function' ? test(o[k]) : test(o[k]);
    if (!ok) return `${path}.${k}: wrong type`;
  }
  return null;
}
const ERROR_SHAPE = { code: [T.str, true], message: [T.str, false], name: [T.str, false] };
const PART_SHAPES = {
  text: { content: [T.str, true] },
  reasoning: { content: [T.str, true], signature: [T.str, false] },
  tool_call: { id: [T.str, true], name: [T.str, true] },
  tool_call_response: { id: [T.str, true], is_error: [T.bool, false] },
  uri: { uri: [T.str, true], mime_type: [T.str, false], modality: [T.str, false] },
  blob: { content: [T.str, true], mime_type: [T.str, true], modality: [T.str, false] },
  file: { file_id: [T.str, true], mime_type: [T.str, false], modality: [T.str, false] },
};
function messageProblem(m, roles, path = '$.data.message') {
  const p = shape(m, { id: [T.str, true], role: [T.str, true], parts: [T.arr, true], name: [T.str, false] }, path);
  if (p) return p;
  if (!roles.includes(m.role)) return `${path}.role: must be ${roles.join(' or ')}`;
  for (let i = 0; i < m.parts.length; i++) {
    const part = m.parts[i];
    const pp = `${path}.parts[${i}]`;
    if (!isPlainObject(part) || typeof part.type !== 'string') return `${pp}: a part needs a string type`;
    const s = PART_SHAPES[part.type]; // other part types are kept as they are (§8.2)
    const q = s && shape(part, s, pp);
    if (q) return q;
  }
  return null;
}
const nonBlank = (v) => typeof v === 'string' && /\S/u.test(v);
const strList = (v) => Array.isArray(v) && v.every(T.str);
const DATA_SHAPES = {
  'user/message': (d) => messageProblem(d.message, ['user', 'system']),
  'assistant/message': (d) => messageProblem(d.message, ['assistant'])
    ?? shape(d, { model: [T.str, false], usage: [T.obj, false], turn: ['int', false], step: ['int', false] }, '$.data'),
  'tool/result': (d) => {
    const p = shape(d, { call_id: [T.str, true], error: [T.obj, false], synthetic: [T.bool, false] }, '$.data')
      ?? (absent(d.error) ? null : shape(d.error, ERROR_SHAPE, '$.data.error'))
      ?? messageProblem(d.message, ['tool']);
    if (p) return p;
    const rs = d.message.parts.filter((x) => x.type === 'tool_call_response');
    if (rs.length !== 1 || rs[0].id !== d.call_id) return '$.data.message.parts: exactly one tool_call_response whose id is call_id';
    return null;
  },
  'surface/retract': (d) => shape(d, { reason: [T.str, false] }, '$.data'),
  'compaction/start': (d) => shape(d, { start: ['int', true], end: ['int', true], reason: [T.str, false] }, '$.data'),
  'compaction/summary': (d) => shape(d, {
    compaction: ['int', true], summary: [nonBlank, true], start: ['int', true], end: ['int', true],
    count: ['int', true], chars: ['int', true], shadowed_chars: ['int', true], tokens: ['int', false],
    summary_tokens: ['int', false], model: [T.str, false], ledger: [T.obj, false],
  }, '$.data') ?? (absent(d.ledger) ? null : shape(d.ledger, { modified: [strList, false], read: [strList, false], evicted: ['int', false] }, '$.data.ledger')),
  'compaction/end': (d) => shape(d, { compaction: ['int', true], message: ['int', false], error: [T.obj, false] }, '$.data')
    ?? (absent(d.error) ? null : shape(d.error, ERROR_SHAPE, '$.data.error')), // §8.7.13: both optional
  'compaction/prune': (d) => shape(d, { target: ['int', true], chars: ['int', true], tokens: ['int', false] }, '$.data'),
  'handoff/anchor': (d) => shape(d, { summary: [nonBlank, true], state: [T.any, false], reason: [T.str, false] }, '$.data'),
  'fork/merge': (d) => shape(d, { fork: [T.str, true], at: ['int', true], head: ['int', true], crc: [T.str, true], count: ['int', true], path: [T.str, false] }, '$.data'),
  'fork/discard': (d) => shape(d, { fork: [T.str, true], at: ['int', true], head: ['int', true], crc: [T.str, true], path: [T.str, false], reason: [T.str, false] }, '$.data'),
  'todo/write': (d) => {
    if (!Array.isArray(d.todos)) return '$.data.todos: must be an array';
    for (let i = 0; i < d.todos.length; i++) {
      const p = shape(d.todos[i], { content: [T.str, true], status: [(s) => ['pending', 'in_progress', 'completed'].includes(s), true], id: [T.str, false] }, `$.data.todos[${i}]`);
      if (p) return p;
    }
    return null;
  },
  'request/header': (d) => shape(d, { model: [T.str, false], provider: [T.str, false], system: [T.str, false], tools: [T.arr, false], params: [T.obj, false] }, '$.data'),
};

/**
 * The fold state of one file: feed it committed events in order with push(ev, rec).
 * Nodes are {ev, session}; `inherited` are the parent's nodes (fixed).
 */
class Surface {
  constructor({ session, inherited = [], header = null, todos = null, allVersions = false }) {
    this.session = session;
    this.inherited = inherited;
    this.nodes = [];
    this.header = header;
    this.todos = todos;
    this.compacting = new Set(); // seqs of compaction/summary, compaction/prune, handoff/anchor
    this.versions = allVersions ? new Map() : null; // seq -> {ev, status, by}
  }

  fail(ev, rec, msg) {
    throw new FoldError('invalid-event', `line ${ev.seq + 1}, byte ${rec.offset}: ${ev.type}: ${msg}`, { line: ev.seq + 1, offset: rec.offset, type: ev.type });
  }

  push(ev0, rec) {
    let ev = ev0;
    const type = ev.type;
    if (ev.seq === 0) return; // the header (§7), checked by the scan
    if (type === 'session/start') this.fail(ev, rec, 'session/start at a seq other than 0');
    if (ALWAYS_IGNORABLE.has(type)) return;
    if (!KNOWN_TYPES.has(type)) {
      if (ev.ignorable === true) return;
      throw new FoldError('unknown-type', `line ${ev.seq + 1}, byte ${rec.offset}: unknown event type ${type} (not ignorable)`, { line: ev.seq + 1, offset: rec.offset, type });
    }
    const visible = MODEL_VISIBLE.has(type);
    if (!visible && type !== 'surface/retract' && ev.surface != null) this.fail(ev, rec, '$.surface: only model-visible events and surface/retract carry surface');
    const check = DATA_SHAPES[type];
    const problem = check && check(ev.data);
    if (problem) this.fail(ev, rec, problem);
    if (!absent(ev.data.origin) && shape(ev.data.origin, { session: [T.str, true], seq: ['int', true] }, '$.data.origin')) {
      this.fail(ev, rec, '$.data.origin: must be {session, seq}');
    }
    if (COMPACTING.has(type)) this.compacting.add(ev.seq);
    if (type === 'request/header') this.header = ev.data;
    else if (type === 'todo/write') this.todos = ev.data.todos;
    if (!visible && type !== 'surface/retract') return;

    // --- the surface operation
    const op = ev0.surface ?? 'append'; // a missing (or null, §6) surface reads as "append"
    if (visible) ev = compact(ev); // keep only what the neutral form needs
    if (visible && this.versions) this.versions.set(ev.seq, { ev, status: 'current', by: null });
    if (op === 'append') {
      if (!visible) this.fail(ev, rec, '$.surface: a surface/retract must carry a retract operation');
      this.nodes.push({ ev, session: this.session });
      return;
    }
    if (!isPlainObject(op) || !isInteger(op, 'start') || !isInteger(op, 'end')) this.fail(ev, rec, '$.surface: "append" or {op, start, end}');
    if (visible ? op.op !== 'replace' : op.op !== 'retract') {
      this.fail(ev, rec, visible ? '$.surface.op: must be "replace" (a retract is carried by surface/retract only)' : '$.surface.op: must be "retract"');
    }
    const i = this.nodes.findIndex((n) => n.ev.seq === op.start);
    const j = this.nodes.findIndex((n) => n.ev.seq === op.end);
    if (i < 0) this.fail(ev, rec, `$.surface.start: ${op.start} is not a current node of this file's surface`);
    if (j < 0) this.fail(ev, rec, `$.surface.end: ${op.end} is not a current node of this file's surface`);
    if (i > j) this.fail(ev, rec, '$.surface: start comes after end on the surface');
    const N = visible ? ev : null;
    const range = this.nodes.slice(i, j + 1);
    const inRange = new Set(range);
    const callsOf = (e) => (e.type === 'assistant/message' ? e.data.message.parts.filter((p) => p.type === 'tool_call').map((p) => p.id) : []);
    // pairing, §8.7.2: calls declared after the operation, and results that go with their calls
    const declaredAfter = new Set(N ? callsOf(N) : []);
    for (const n of this.nodes) if (!inRange.has(n)) for (const id of callsOf(n.ev)) declaredAfter.add(id);
    const answeredOutside = new Set();
    for (const n of this.nodes) if (!inRange.has(n) && n.ev.type === 'tool/result') answeredOutside.add(n.ev.data.call_id);
    if (N && N.type === 'tool/result') answeredOutside.add(N.data.call_id);
    for (const n of range) {
      if (n.ev.type === 'tool/result' && declaredAfter.has(n.ev.data.call_id) && !answeredOutside.has(n.ev.data.call_id)) {
        this.fail(ev, rec, `$.surface: would leave tool call ${n.ev.data.call_id} without its result`);
      }
    }
    // Rule 4 is about replaces (a revision or prune of one result); a retract has no N.
    if (N && ((N.type === 'tool/result') || (range.length === 1 && range[0].ev.type === 'tool/result'))) {
      if (!(range.length === 1 && range[0].ev.type === 'tool/result' && N && N.type === 'tool/result' && N.data.call_id === range[0].ev.data.call_id)) {
        this.fail(ev, rec, '$.surface: a tool result is replaced only in place, by a tool/result with the same call_id');
      }
    }
    const declaredInRange = new Set(range.flatMap((n) => callsOf(n.ev)));
    const dependent = this.nodes.filter((n) => !inRange.has(n) && n.ev.type === 'tool/result'
      && declaredInRange.has(n.ev.data.call_id) && !declaredAfter.has(n.ev.data.call_id));
    const removed = [...range, ...dependent];
    if (N) {
      const src = new Set(ev.sources ?? []);
      const missing = removed.find((n) => !src.has(n.ev.seq));
      if (missing) this.fail(ev, rec, `$.sources: must list every removed seq (${missing.ev.seq} is missing)`);
    }
    const status = !N ? 'retracted' : (ev.sources ?? []).some((s) => this.compacting.has(s)) ? 'compacted' : 'superseded';
    if (this.versions) for (const n of removed) Object.assign(this.versions.get(n.ev.seq), { status, by: ev.seq });
    const gone = new Set(removed);
    const next = [];
    for (const n of this.nodes) {
      if (n === range[0] && N) next.push({ ev: N, session: this.session });
      if (!gone.has(n)) next.push(n);
    }
    this.nodes = next;
  }

  /** The neutral items (§8.7.10) of the current nodes, inherited ones first. */
  messages() { return [...this.inherited, ...this.nodes].map((n) => neutralItem(n, this.session)); }
}

const compact = ({ seq, time, type, data, sources }) => ({
  seq, time, type, sources, data: { message: data.message, call_id: data.call_id, error: data.error, synthetic: data.synthetic, origin: data.origin },
});

function neutralItem({ ev, session }, own) {
  const item = { seq: ev.seq };
  if (session !== own) item.session = session;
  Object.assign(item, { time: ev.time, type: ev.type, message: ev.data.message });
  if (ev.type === 'tool/result') {
    item.call_id = ev.data.call_id;
    if (!absent(ev.data.error) && ev.data.error !== false) item.error = ev.data.error;
    if (!absent(ev.data.synthetic) && ev.data.synthetic !== false) item.synthetic = ev.data.synthetic;
  }
  if (!absent(ev.data.origin)) item.origin = ev.data.origin;
  return item;
}

/**
 * Fold a session (§8.7). Options:
 *  - at: fold as of this committed seq (time travel);
 *  - resolveParent({session, path, seq, crc}): returns a source (path, bytes or chunks) for a
 *    fork's parent, or null. Without it, a path given as `source` lets the hint
 *    `parent.path` be resolved relative to the fork file's directory.
 *  - allVersions: also return every model-visible event with its status and `by`;
 *  - spans, holdLimit: as for walk() (for the fork's parents too).
 * Returns {session, seq, header?, todos?, messages, versions?}. Throws TapeError / FoldError.
 */
export async function fold(source, opts = {}, _chain = []) {
  const { at = null, allVersions = false } = opts;
  let sf = null;
  let last = null;
  // Errors are reported in file order: a fold error (always before B) stops the fold at once;
  // a corrupt file is refused after its last committed event (README.md, spec problems).
  for await (const { event: ev, rec } of walkChecked(source, opts)) {
    if (at !== null && ev.seq > at) continue;
    if (ev.seq === 0) {
      // a parent must be the session the fork names before its own ancestors are looked at
      if (opts._expect !== undefined && ev.data.id !== opts._expect) {
        throw new FoldError('parent-changed', `the parent file holds session ${ev.data.id}, not ${opts._expect}`);
      }
      sf = await startFold(ev, source, opts, _chain, allVersions);
    }
    else sf.push(ev, rec);
    last = ev;
  }
  if (at !== null && last.seq !== at) throw new FoldError('no-such-seq', `the file has no committed seq ${at}`);
  const out = { session: sf.session, seq: last.seq };
  if (sf.header) out.header = sf.header;
  if (sf.todos) out.todos = sf.todos;
  out.messages = sf.messages();
  if (allVersions) {
    const inherited = sf.inheritedVersions ?? [];
    out.versions = [...inherited, ...[...sf.versions.values()].map((v) => ({ ...neutralItem({ ev: v.ev, session: sf.session }, sf.session), status: v.status, ...(v.by === null ? {} : { by: v.by }) }))];
  }
  return out;
}

/** walk() that turns a corrupt classification into an error after the last committed event. */
async function* walkChecked(source, { spans, holdLimit }) {
  const it = walk(source, { spans, holdLimit });
  for (;;) {
    const { value, done } = await it.next();
    if (done) { if (value.state === 'corrupt') throw corruptError(value.bad); return; }
    yield value;
  }
}

async function startFold(header, source, opts, chain, allVersions) {
  const id = header.data.id;
  const parent = header.data.parent;
  if (absent(parent)) return new Surface({ session: id, allVersions });
  if (shape(parent, { session: [T.str, true], seq: ['int', true], path: [T.str, false], crc: [T.str, false] }, '$.data.parent')) {
    throw new FoldError('invalid-event', 'line 1: $.data.parent must be {session, seq, path?, crc?}', { line: 1 });
  }
  const ids = [id, ...chain];
  if (ids.includes(parent.session)) throw new FoldError('fork-cycle', `fork chain comes back to session ${parent.session}`);
  if (ids.length > 64) throw new FoldError('fork-cycle', 'more than 64 ancestors');
  // a location the caller gives for that session id, or else the path hint (§8.7.8)
  let where = opts.resolveParent ? (await opts.resolveParent({ ...parent })) ?? null : null;
  if (where === null && typeof parent.path === 'string' && typeof source === 'string') {
    const { resolve, dirname } = await import('node:path');
    where = resolve(dirname(source), parent.path);
  }
  const looked = where === null ? 'nowhere (no location given and no usable path hint)' : typeof where === 'string' ? where : 'the given source';
  let pf;
  try {
    if (where === null) throw new Error('not found');
    if (typeof where === 'string') { const { stat } = await import('node:fs/promises'); await stat(where); }
    pf = await fold(where, { ...opts, at: parent.seq, allVersions, _expect: parent.session }, ids);
  } catch (e) {
    if (e instanceof FoldError && e.code === 'no-such-seq') throw new FoldError('parent-changed', `parent ${parent.session} has no committed seq ${parent.seq}`);
    if (e instanceof TapeError) throw e;
    throw new FoldError('parent-not-found', `parent session ${parent.session} not found; looked in ${looked}`, { session: parent.session });
  }
  if (pf.session !== parent.session) throw new FoldError('parent-changed', `the parent file holds session ${pf.session}, not ${parent.session}`);
  if (typeof parent.crc === 'string') {
    let crc = null;
    for await (const ev of readEvents(where, opts)) if (ev.seq === parent.seq) { crc = ev.crc; break; }
    if (crc !== parent.crc) throw new FoldError('parent-changed', `parent line seq ${parent.seq} has crc ${crc}, the fork expects ${parent.crc}`);
  }
  const s = new Surface({
    session: id,
    inherited: pf.messages.map((m) => ({ ev: { seq: m.seq, time: m.time, type: m.type, data: { message: m.message, call_id: m.call_id, error: m.error, synthetic: m.synthetic, origin: m.origin } }, session: m.session ?? pf.session })),
    header: pf.header ?? null,
    todos: pf.todos ?? null,
    allVersions,
  });
  if (allVersions) s.inheritedVersions = pf.versions.map((v) => ({ ...v, session: v.session ?? pf.session }));
  return s;
}

// ---------------------------------------------------------------------------------------------
// CLI: the conformance protocol.

const errorOf = (e) => { if (e instanceof TapeError) return e; throw e; };

/**
 * Run a protocol command; returns the pieces of exactly one JSON object text (joined, they are
 * the output). Pieces keep big outputs (read, fold) from being copied into one string.
 * `opts` (spans, holdLimit) go to the scan.
 */
export async function commandParts(cmd, source, opts = {}) {
  const one = (o) => [stringifyJson(o)];
  switch (cmd) {
    case 'checksum': {
      let c = 0;
      for await (const chunk of chunksOf(source)) c = crc32(chunk, c);
      return one({ crc: hex8(c) });
    }
    case 'read': {
      const parts = ['{"ok":true,"events":['];
      try {
        for await (const ev of readEvents(source, opts)) parts.push(parts.length > 1 ? ',' + stringifyJson(ev) : stringifyJson(ev));
      } catch (e0) {
        const e = errorOf(e0);
        return one({ ok: false, error: e.code, line: e.line ?? null, offset: e.offset ?? null });
      }
      parts.push(']}');
      return parts;
    }
    case 'verify': {
      try {
        const v = await verify(source, opts);
        return one({ state: v.state, events: v.events, line: v.line, offset: v.offset });
      } catch (e0) { return one({ error: errorOf(e0).code }); }
    }
    case 'repair': {
      try {
        const p = await planRepair(source, opts);
        return one({ state: p.state, cut: p.cut, kept: p.kept, closers: p.closers });
      } catch (e0) {
        const e = errorOf(e0);
        return one(e.code === 'corrupt' ? { error: 'corrupt', line: e.line, offset: e.offset } : { error: e.code });
      }
    }
    case 'fold': {
      let r;
      try {
        r = await fold(source, opts);
      } catch (e0) {
        const e = errorOf(e0);
        if (e.code === 'unknown-type') return one({ error: 'unknown-type', type: e.type, line: e.line });
        if (e.code === 'invalid-event') return one({ error: 'invalid-event', line: e.line });
        return one({ error: e.code });
      }
      return ['{"messages":[', ...r.messages.map((m, i) => (i ? ',' : '') + stringifyJson(m)), ']}'];
    }
    default:
      throw new Error(`unknown command ${cmd}`);
  }
}

/** Run a protocol command and return its output as a value. */
export async function runCommand(cmd, source, opts = {}) {
  return parseJson((await commandParts(cmd, source, opts)).join(''));
}

const USAGE = 'usage: node jsonltape.mjs [--no-spans] checksum|read|verify|repair|fold [FILE] < input\n'
  + '  --no-spans (or JSONLTAPE_SPANS=0): check every line by its own CRC, ignoring span checksums\n';

async function main() {
  const args = process.argv.slice(2);
  const noSpans = args.includes('--no-spans');
  const [cmd, file, ...rest] = args.filter((a) => a !== '--no-spans');
  if (!['checksum', 'read', 'verify', 'repair', 'fold'].includes(cmd) || rest.length || file?.startsWith('--')) {
    process.stderr.write(USAGE);
    process.exit(2);
  }
  const spans = !noSpans && process.env.JSONLTAPE_SPANS !== '0';
  const parts = await commandParts(cmd, file ?? process.stdin, { spans });
  parts.push('\n');
  let chunk = '';
  for (let i = 0; i < parts.length; i++) {
    chunk += parts[i];
    parts[i] = null;
    if (chunk.length >= 1 << 20 || i === parts.length - 1) {
      if (!process.stdout.write(chunk)) await new Promise((r) => process.stdout.once('drain', r));
      chunk = '';
    }
  }
  process.stdout.write('', () => process.exit(0));
}

const isMain = (() => {
  try { return process.argv[1] && realpathSync(process.argv[1]) === realpathSync(fileURLToPath(import.meta.url)); } catch { return false; }
})();
if (isMain) {
  main().catch((e) => { process.stderr.write(`jsonltape.mjs: internal error: ${e?.stack ?? e}\n`); process.exit(70); });
}
