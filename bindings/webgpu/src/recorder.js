// recorder.js — per-kernel statistics and spans, written as a ktiming snapshot (schema "ktiming.snapshot" v3,
// docs/json-schema.md) and as a Chrome trace. Plain JavaScript: runs in a browser and in Node.
//
// Times are BigInt nanoseconds throughout (a u64 in the schema); statistics keep exact BigInt sums, so the
// snapshot's sum_ns / sumsq_ns2 are exact as the C recorder's are.

export const SCHEMA_NAME = 'ktiming.snapshot';
export const SCHEMA_VERSION = 3;
export const BACKEND = 'webgpu';
export const VERSION = '0.1.0';

// Span flags (include/ktiming.h KT_SPAN_*).
export const SPAN_DEVICE = 1;      // start/end from the device clock placed on the host timeline
export const SPAN_HOST_TIMED = 2;  // host-bracketed: the host clock measured it
export const SPAN_ERROR = 4;       // ended in error
export const SPAN_TRIALS = 8;      // one of several trial dispatches of a primitive

// Drop reasons, in the schema's order (src/shared/shared.h kt__drop_reason_id).
export const DROP_REASONS = ['unspecified', 'ring_full', 'in_flight_at_exit', 'simultaneous_use', 'never_submitted',
  'device_lost', 'context_reset', 'graph_capture', 'no_timing', 'read_failed', 'invalid_times', 'resubmitted'];

const U64_MAX = (1n << 64n) - 1n;
const SAFE = BigInt(Number.MAX_SAFE_INTEGER);

// A UTF-16 surrogate without its pair: not a character, no UTF-8 form (JSON.stringify writes it as "\ud800",
// which the C reader refuses).
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** s as a string of characters only: every lone surrogate replaced by U+FFFD (as UTF-8 encoding does). */
export function wellFormed(s) { return String(s).replace(LONE_SURROGATE, '\ufffd'); }

// ---------------------------------------------------------------------------------------------------------
// The log-linear histogram of the C library (src/core/hist.h): one bucket per ns below 128, then 64 buckets per
// power of two. Same indices and bounds, so a merge in C adds these buckets to its own.
// ---------------------------------------------------------------------------------------------------------

const HIST_SUB = 64n;

function bitLength(v) { return v === 0n ? 0 : v.toString(2).length; }

/** Bucket index of a duration (BigInt ns). */
export function histIndex(v) {
  if (v < 128n) return Number(v);
  const k = BigInt(bitLength(v) - 1);
  return Number(128n + (k - 7n) * HIST_SUB + ((v >> (k - 6n)) & (HIST_SUB - 1n)));
}

/** Lowest value of a bucket. */
export function histLower(idx) {
  if (idx < 128) return BigInt(idx);
  const j = BigInt(idx - 128), k = j / HIST_SUB + 7n, sub = j % HIST_SUB;
  return (HIST_SUB + sub) << (k - 6n);
}

/** Representative value of a bucket: its midpoint (the value itself below 128). */
export function histValue(idx) {
  if (idx < 128) return BigInt(idx);
  const k = BigInt(idx - 128) / HIST_SUB + 7n;
  return histLower(idx) + ((1n << (k - 6n)) - 1n) / 2n;
}

// ---------------------------------------------------------------------------------------------------------
// One kernel's statistics
// ---------------------------------------------------------------------------------------------------------

// Deterministic generator for the sample reservoir (xorshift32), so two runs keep the same positions.
function xorshift(seed) {
  let s = seed >>> 0 || 0x9e3779b9;
  return () => {
    s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
    return s / 4294967296;
  };
}

class Entry {
  constructor(name, device, sampleCapacity) {
    this.name = name;            // kernel name
    this.device = device;        // device name
    this.count = 0n;             // successful dispatches
    this.sum = 0n;               // exact sum of durations
    this.sumsq = 0n;             // exact sum of squared durations
    this.min = 0n;               // shortest duration
    this.max = 0n;               // longest duration
    this.last = 0n;              // most recent duration
    this.hist = new Map();       // bucket index -> count
    this.samples = [];           // uniform reservoir of durations
    this.sampleCapacity = sampleCapacity;
    this.errors = 0n;            // dispatches that ended in error
    this.lastError = '';         // name of the latest error
    this.dropped = new Array(DROP_REASONS.length).fill(0n); // lost before being recorded, by reason
    this.spansDropped = 0n;      // aggregated but no span kept
    this.rand = xorshift(name.length * 2654435761 + 1);
  }

  add(d) {
    this.count += 1n;
    this.sum += d;
    this.sumsq += d * d;
    if (this.count === 1n || d < this.min) this.min = d;
    if (d > this.max) this.max = d;
    this.last = d;
    const i = histIndex(d);
    this.hist.set(i, (this.hist.get(i) || 0n) + 1n);
    if (this.samples.length < this.sampleCapacity) {
      this.samples.push(d);
    } else if (this.sampleCapacity > 0) { // Algorithm R: the n-th value replaces a random slot with p = cap/n
      const j = Math.floor(this.rand() * Number(this.count));
      if (j < this.sampleCapacity) this.samples[j] = d;
    }
  }

  droppedTotal() { return this.dropped.reduce((a, b) => a + b, 0n); }

  // Nearest-rank percentiles (the ceil(p*n)-th smallest) from the histogram, clamped to [min, max], as the C
  // snapshot computes them.
  percentiles() {
    const n = this.count, ps = [0.5, 0.9, 0.99];
    const out = [this.max, this.max, this.max];
    if (n === 0n) return [0n, 0n, 0n];
    const ranks = ps.map((p) => { const r = BigInt(Math.ceil(p * Number(n))); return r < 1n ? 1n : r; });
    const idx = [...this.hist.keys()].sort((a, b) => a - b);
    let cum = 0n, k = 0;
    for (const i of idx) {
      cum += this.hist.get(i);
      while (k < 3 && cum >= ranks[k]) out[k++] = histValue(i);
      if (k === 3) break;
    }
    return out.map((v) => (v < this.min ? this.min : v > this.max ? this.max : v));
  }

  mean() { return this.count ? Number(this.sum) / Number(this.count) : 0; }

  stddev() { // sample standard deviation from the exact sums
    const n = this.count;
    if (n < 2n) return 0;
    const num = n * this.sumsq - this.sum * this.sum;
    return num <= 0n ? 0 : Math.sqrt(Number(num) / (Number(n) * Number(n - 1n)));
  }
}

// ---------------------------------------------------------------------------------------------------------
// The recorder
// ---------------------------------------------------------------------------------------------------------

/**
 * Holds what the timers record: per (kernel name, device) statistics, spans up to a cap, the devices' clock
 * facts and the queues. One recorder may serve several timers (devices).
 */
export class Recorder {
  /**
   * @param {object} [opts]
   * @param {number} [opts.maxSpans=16384] spans kept (later dispatches are still aggregated, counted as spans_dropped)
   * @param {number} [opts.sampleCapacity=1024] raw durations kept per kernel (uniform reservoir)
   * @param {string} [opts.host=''] machine name written in the snapshot
   * @param {number} [opts.pid=0] process id written in the snapshot
   * @param {() => bigint} [opts.now] host clock for taken_ns
   * @param {string} [opts.clockDomain='unknown'] the clock of every host time recorded (hostClockName() for
   *   hostClock()): `ktiming merge` puts a 'CLOCK_MONOTONIC' snapshot on a C snapshot's timeline through its anchor
   */
  constructor(opts = {}) {
    this.maxSpans = opts.maxSpans ?? 16384;
    this.sampleCapacity = opts.sampleCapacity ?? 1024;
    this.host = wellFormed(opts.host ?? '');
    this.pid = opts.pid ?? 0;
    this.now = opts.now ?? (() => 0n);
    this.clockDomain = opts.clockDomain ?? 'unknown';
    this.entries = new Map(); // "device\0name" -> Entry
    this.spans = [];          // {entry: Entry, queue, flags, duration, start, end, enqueue, submit, uncertainty}
    this.queues = [];         // {device, label}
    this.devices = new Map(); // name -> () => device facts (read when the snapshot is taken)
    this.labels = new WeakMap(); // device object -> its label here (deviceLabel)
    this.pending = new Set();    // () => [name, device, reason][]: dispatches not recorded yet, counted in a snapshot
  }

  /** The entry of (name, device), created on first use. */
  kernel(name, device) {
    // names as the file writes them (two names differing only by a lone surrogate are one entry there)
    const n = wellFormed(name), d = wellFormed(device);
    const key = `${d}\u0000${n}`;
    let e = this.entries.get(key);
    if (!e) {
      e = new Entry(n, d, this.sampleCapacity);
      this.entries.set(key, e);
    }
    return e;
  }

  /** Registers a queue; returns its index. */
  queue(device, label) {
    this.queues.push({ device: wellFormed(device), label: wellFormed(label) });
    return this.queues.length - 1;
  }

  /**
   * The label of a device named `name` in this recorder (docs/devices.md: unique among the snapshot's devices):
   * the name while no other device has it, else the name and " #2", " #3"...; at most 127 UTF-8 bytes, the
   * format's device names. `obj` (the GPUDevice) keeps its label when it is labelled again.
   */
  deviceLabel(name, obj) {
    if (obj && this.labels.has(obj)) return this.labels.get(obj);
    const base = wellFormed(name);
    const used = (l) => this.devices.has(l) || this.queues.some((q) => q.device === l);
    let label = truncUtf8(base, 127);
    for (let i = 2; used(label); i++) label = `${truncUtf8(base, 127 - ` #${i}`.length)} #${i}`;
    if (obj) this.labels.set(obj, label);
    return label;
  }

  /** Registers the clock facts of a device: `facts()` is called when a snapshot is taken. */
  device(name, facts) { this.devices.set(wellFormed(name), facts); }

  /**
   * Records one dispatch of `entry`: its duration aggregated, and a span when start is given.
   * @param {Entry} entry
   * @param {{duration: bigint, start?: bigint, end?: bigint, flags?: number, queue?: number,
   *          enqueue?: bigint, submit?: bigint, uncertainty?: bigint, done?: bigint}} r
   *   done: host time the submit was seen complete (kept in memory for checks, not written)
   */
  record(entry, r) {
    if (r.duration < 0n) throw new RangeError('negative duration');
    entry.add(r.duration);
    if (r.start === undefined) return;
    if (this.spans.length >= this.maxSpans) {
      entry.spansDropped += 1n;
      return;
    }
    this.spans.push({
      entry, queue: r.queue ?? null, flags: r.flags ?? 0, duration: r.duration, start: r.start,
      end: r.end ?? r.start + r.duration, enqueue: r.enqueue ?? 0n, submit: r.submit ?? 0n,
      uncertainty: r.uncertainty ?? 0n, done: r.done ?? 0n,
    });
  }

  /** Counts `n` dispatches of `entry` lost before they could be recorded, for `reason` (a DROP_REASONS name). */
  drop(entry, reason, n = 1) {
    let r = DROP_REASONS.indexOf(reason);
    if (r < 0) r = 0;
    entry.dropped[r] += BigInt(n);
  }

  /** Counts a dispatch of `entry` that ended in error (not aggregated). */
  error(entry, name) {
    entry.errors += 1n;
    if (name) entry.lastError = truncUtf8(wellFormed(name), 47);
  }

  /**
   * The snapshot as a plain object (times BigInt), sorted as the schema wants. The dispatches the `pending`
   * sources name are counted dropped in it, for their reason, as of this moment (the recorder keeps no count of
   * them: they may still be recorded).
   */
  snapshot() {
    const extra = new Map(); // key -> [entry, dropped counts to add]; an entry made here is this snapshot's only
    for (const src of this.pending) {
      for (const [name, device, reason] of src()) {
        const n = wellFormed(name), d = wellFormed(device), key = `${d}\u0000${n}`;
        if (!extra.has(key)) {
          extra.set(key, [this.entries.get(key) ?? new Entry(n, d, 0), new Array(DROP_REASONS.length).fill(0n)]);
        }
        extra.get(key)[1][Math.max(0, DROP_REASONS.indexOf(reason))] += 1n;
      }
    }
    const all = [...new Set([...this.entries.values(), ...[...extra.values()].map(([e]) => e)])]
      .sort((a, b) => cmpBytes(a.name, b.name) || cmpBytes(a.device, b.device));
    const index = new Map(all.map((e, i) => [e, i]));
    const ents = all.map((e) => { // an entry with pending dispatches: a copy with them counted
      const x = extra.get(`${e.device}\u0000${e.name}`);
      if (!x) return e;
      return Object.assign(Object.create(Object.getPrototypeOf(e)), e, { dropped: e.dropped.map((n, r) => n + x[1][r]) });
    });
    const spans = this.spans.slice().sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
    const devices = [...this.devices.entries()].map(([name, facts]) => ({ name, ...facts() }));
    return { taken: this.now(), entries: ents, index, spans, queues: this.queues, devices };
  }

  /** The snapshot JSON text (schema ktiming.snapshot, version 3). */
  toJSON() { return snapshotJSON(this); }

  /** The Chrome trace JSON text (chrome://tracing, Perfetto). */
  toChromeTrace() { return chromeTraceJSON(this); }
}

// ---------------------------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------------------------

const encoder = new TextEncoder();

function cmpBytes(a, b) { // byte order of the UTF-8 strings, as the C side sorts (strcmp)
  const x = encoder.encode(a), y = encoder.encode(b);
  const n = Math.min(x.length, y.length);
  for (let i = 0; i < n; i++) if (x[i] !== y[i]) return x[i] - y[i];
  return x.length - y.length;
}

/** Cuts s to at most `max` UTF-8 bytes without splitting a character. */
export function truncUtf8(s, max) {
  if (encoder.encode(s).length <= max) return s;
  let out = '';
  let n = 0;
  for (const ch of s) {
    const l = encoder.encode(ch).length;
    if (n + l > max) break;
    out += ch;
    n += l;
  }
  return out;
}

// A JSON string: JSON.stringify escapes quotes, backslashes and controls; U+2028/2029 as the C writer does; a lone
// surrogate (not a character) becomes U+FFFD.
function jstr(s) {
  return JSON.stringify(wellFormed(s).replace(/\u0000/g, '\ufffd')).replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
}

// A u64/u128 as the schema writes it: a number up to 2^53-1, else a decimal string.
function ju(v) {
  const b = BigInt(v);
  if (b < 0n) throw new RangeError(`negative value ${b} for an unsigned field`);
  return b <= SAFE ? b.toString() : `"${b.toString()}"`;
}

function jd(v) { // a double: shortest round-trip form, non-finite as null
  if (!Number.isFinite(v)) return 'null';
  return v === 0 ? '0' : String(v);
}

function sat64(v) { return v > U64_MAX ? U64_MAX : v; }

function toSigned64(v) { // v modulo 2^64 as a signed 64-bit value
  return BigInt.asIntN(64, v);
}

// One span-table column: tokens with runs of equal values written "v*n".
function column(values) {
  const out = [];
  let prev = null, n = 0;
  const flush = () => { if (n) out.push(n > 1 ? `${prev}*${n}` : prev); };
  for (const v of values) {
    if (n && v === prev) { n++; continue; }
    flush();
    prev = v;
    n = 1;
  }
  flush();
  return out.join(' ');
}

function entryJSON(e) {
  const [p50, p90, p99] = e.percentiles();
  const dropped = e.droppedTotal();
  let s = `    {"name": ${jstr(e.name)}, "backend": "${BACKEND}", "device": ${jstr(e.device)},\n`;
  s += `     "dispatch_count": ${ju(e.count)}, "total_ns": ${ju(sat64(e.sum))}, "min_ns": ${ju(e.min)}, "max_ns": ${ju(e.max)}, "last_ns": ${ju(e.last)},\n`;
  s += `     "mean_ns": ${jd(e.mean())}, "stddev_ns": ${jd(e.stddev())}, "p50_ns": ${ju(p50)}, "p90_ns": ${ju(p90)}, "p99_ns": ${ju(p99)},\n`;
  s += `     "errors": ${ju(e.errors)}, "dropped": ${ju(dropped)}, "spans_dropped": ${ju(e.spansDropped)},\n`;
  s += `     "sum_ns": ${ju(e.sum)}, "sumsq_ns2": ${ju(e.sumsq)}`;
  if (e.lastError) s += `, "last_error": ${jstr(e.lastError)}`;
  if (dropped) {
    const parts = [];
    e.dropped.forEach((n, r) => { if (n) parts.push(`${jstr(DROP_REASONS[r])}: ${ju(n)}`); });
    s += `, "dropped_by": {${parts.join(', ')}}`;
  }
  if (e.hist.size) {
    const bins = [...e.hist.keys()].sort((a, b) => a - b).map((i) => `[${ju(histLower(i))}, ${ju(e.hist.get(i))}]`);
    s += `,\n     "hist": [${bins.join(', ')}]`;
  }
  s += `,\n     "sample_count": ${e.samples.length},\n     "samples": [${e.samples.map(ju).join(', ')}]}`;
  return s;
}

function deviceJSON(d) {
  return `    {"backend": "${BACKEND}", "name": ${jstr(truncUtf8(d.name, 127))}, ` +
    `"clock_domain": ${jstr(d.clockDomain ?? 'device')},\n     "resolution_ns": ${ju(d.resolutionNs ?? 0n)}, ` +
    `"frequency_hz": ${ju(d.frequencyHz ?? 0n)}, "valid_bits": ${d.validBits ?? 0}, ` +
    `"error_bound_ns": ${ju(d.errorBoundNs ?? 0n)}, "drift_ppm": ${jd(d.driftPpm ?? 0)}, ` +
    `"model_samples": ${d.modelSamples ?? 0}}`;
}

/** The snapshot JSON text of a recorder (docs/json-schema.md, version 3 with a span table). */
export function snapshotJSON(rec) {
  const snap = rec.snapshot();
  const parts = [];
  parts.push(`{\n  "schema": "${SCHEMA_NAME}",\n  "version": ${SCHEMA_VERSION},\n  "generator": ${jstr(`ktiming-webgpu ${VERSION}`)}`);
  parts.push(`,\n  "host": ${jstr(truncUtf8(rec.host, 63))}`);
  parts.push(`,\n  "pid": ${Number(rec.pid) || 0}, "rank": -1, "kernels_dropped": 0`);
  parts.push(`,\n  "taken_ns": ${ju(snap.taken)}, "clock_domain": ${jstr(truncUtf8(rec.clockDomain, 31))}`);
  parts.push(`,\n  "entries": [${snap.entries.length ? '\n' : ''}${snap.entries.map(entryJSON).join(',\n')}${snap.entries.length ? '\n  ' : ''}]`);

  const sp = snap.spans;
  let prev = 0n;
  const cols = {
    entry: sp.map((s) => String(snap.index.get(s.entry))),
    queue: sp.map((s) => (s.queue === null ? '-' : String(s.queue))),
    thread: sp.map(() => '0'),
    flags: sp.map((s) => String(s.flags)),
    duration_ns: sp.map((s) => s.duration.toString()),
    start_ns: sp.map((s) => { const d = toSigned64(s.start - prev); prev = s.start; return d.toString(); }),
    end_ns: sp.map((s) => toSigned64(s.end - s.start - s.duration).toString()),
    enqueue_ns: sp.map((s) => (s.enqueue ? toSigned64(s.enqueue - s.start).toString() : '-')),
    queued_ns: sp.map(() => '-'),
    submit_ns: sp.map((s) => (s.submit ? toSigned64(s.submit - s.start).toString() : '-')),
    uncertainty_ns: sp.map((s) => (s.uncertainty ? s.uncertainty.toString() : '-')),
  };
  parts.push(`,\n  "span_table": {"count": ${sp.length}`);
  for (const [k, v] of Object.entries(cols)) parts.push(`,\n    "${k}": "${column(v)}"`);
  parts.push('}');

  const qs = snap.queues.map((q) => `    {"backend": "${BACKEND}", "device": ${jstr(truncUtf8(q.device, 127))}, "label": ${jstr(truncUtf8(q.label, 63))}}`);
  parts.push(`,\n  "queues": [${qs.length ? `\n${qs.join(',\n')}\n  ` : ''}]`);
  parts.push(`,\n  "threads": [\n    {"os_tid": ${Number(rec.pid) || 0}, "name": "main"}\n  ]`);
  const ds = snap.devices.map(deviceJSON);
  parts.push(`,\n  "devices": [${ds.length ? `\n${ds.join(',\n')}\n  ` : ''}]`);
  parts.push('\n}\n');
  return parts.join('');
}

function us(ns) { // ns BigInt -> microseconds as a JSON number with ns precision
  const neg = ns < 0n;
  const a = neg ? -ns : ns;
  const frac = (a % 1000n).toString().padStart(3, '0');
  return `${neg ? '-' : ''}${a / 1000n}.${frac}`;
}

/** The Chrome trace JSON text of a recorder: one process per device, one track per queue (ts, dur in us). */
export function chromeTraceJSON(rec) {
  const snap = rec.snapshot();
  const ev = [];
  const pids = new Map();
  const pidOf = (device) => {
    if (!pids.has(device)) {
      const pid = pids.size + 1;
      pids.set(device, pid);
      ev.push(`{"ph":"M","name":"process_name","pid":${pid},"tid":0,"args":{"name":${jstr(`WebGPU ${device}`)}}}`);
    }
    return pids.get(device);
  };
  const named = new Set();
  for (const s of snap.spans) {
    const q = s.queue === null ? null : snap.queues[s.queue];
    const pid = pidOf(s.entry.device);
    const tid = s.queue === null ? 0 : s.queue + 1;
    if (!named.has(`${pid}.${tid}`)) {
      named.add(`${pid}.${tid}`);
      ev.push(`{"ph":"M","name":"thread_name","pid":${pid},"tid":${tid},"args":{"name":${jstr(q ? q.label : 'host')}}}`);
    }
    let args = `"kernel":${jstr(s.entry.name)},"device":${jstr(s.entry.device)},"duration_ns":${s.duration}`;
    if (s.flags & SPAN_DEVICE) args += `,"uncertainty_ns":${s.uncertainty}`;
    if (s.submit && s.start >= s.submit) args += `,"submit_to_start_ns":${s.start - s.submit}`;
    if (s.enqueue && s.start >= s.enqueue) args += `,"enqueue_to_start_ns":${s.start - s.enqueue}`;
    if (s.flags & SPAN_HOST_TIMED) args += ',"host_timed":true';
    if (s.flags & SPAN_ERROR) args += ',"error":true';
    if (s.flags & SPAN_TRIALS) args += ',"trial":true';
    ev.push(`{"ph":"X","name":${jstr(s.entry.name)},"cat":"WebGPU","pid":${pid},"tid":${tid},"ts":${us(s.start)},` +
      `"dur":${us(s.end - s.start)},"args":{${args}}}`);
  }
  const dropped = snap.entries.reduce((a, e) => a + e.spansDropped, 0n);
  return `{"displayTimeUnit":"ns","otherData":{"generator":${jstr(`ktiming-webgpu ${VERSION}`)},"host":${jstr(rec.host)},` +
    `"taken_ns":${snap.taken},"spans":${snap.spans.length},"spans_dropped":${dropped}},\n"traceEvents":[\n${ev.join(',\n')}\n]}\n`;
}
