// timer.js — times every compute pass of a GPUDevice with timestamp queries, without stalling the program.
//
// wrapDevice(device) patches, on that device's own objects only, createCommandEncoder (each encoder's
// beginComputePass and finish) and queue.submit:
//   beginComputePass  gets timestampWrites for two queries of a slot (a query set + its resolve buffer + a
//                     mappable read-back buffer) taken from a ring of slots; no free slot: the pass runs untimed
//                     and is counted as dropped (ring_full), never silently.
//   finish            resolves the slots the encoder used and copies them into their read-back buffers.
//   submit            submits first, noting the host time before it; once the program yields (a microtask),
//                     one onSubmittedWorkDone() covers every submit made meanwhile, and the host time after it
//                     closes their brackets; only then are the read-back buffers mapped (mapAsync) and the passes
//                     recorded, then the slots' read-back buffers are cleared on the queue and the slots reused.
//                     Nothing is awaited inside the program's submit call.
// Encoders and command buffers dropped unsubmitted give their slots back when garbage-collected; a snapshot counts
// the passes not submitted yet as never_submitted as of its moment; close() counts those still unsubmitted.
// Each pass is one dispatch of the kernel named by the pass label, else by the label of the first pipeline set.
// Plain JavaScript (no imports beyond this package): runs in a browser and in Node.

import { Recorder, SPAN_DEVICE, truncUtf8 } from './recorder.js';
import { ClockModel, hostClock, hostClockName } from './clock.js';
import { Primitive, MAX_PASSES_PER_QUERY_SET } from './primitive.js';

// WebGPU constants, numeric so that no global (GPUBufferUsage...) is needed.
const USAGE_MAP_READ = 0x1, USAGE_COPY_SRC = 0x4, USAGE_COPY_DST = 0x8, USAGE_QUERY_RESOLVE = 0x200;
const MAP_READ = 0x1;

const LOST = Symbol('device lost'); // thrown inside _complete() when a wait lost its race against device.lost

function gcd(a, b) { while (b) [a, b] = [b, a % b]; return a; }

/** A device's name from its GPUAdapterInfo (description, else vendor/architecture/device). */
export function adapterName(info) {
  if (!info) return 'WebGPU device';
  const d = info.description || [info.vendor, info.architecture, info.device].filter(Boolean).join(' ');
  return truncUtf8(d || 'WebGPU device', 127);
}

/**
 * Wraps a GPUDevice so that every compute pass is timed. See WebGPUTimer.
 * @param {GPUDevice} device
 * @param {object} [opts] see WebGPUTimer
 */
export function wrapDevice(device, opts = {}) { return new WebGPUTimer(device, opts); }

export class WebGPUTimer {
  /**
   * @param {GPUDevice} device  a device created with requiredFeatures ['timestamp-query'] (without it every
   *                            pass is counted as dropped, reason no_timing)
   * @param {object} [opts]
   * @param {Recorder} [opts.recorder]      where to record (default: a new one)
   * @param {GPUAdapterInfo} [opts.adapterInfo] names the device (default device.adapterInfo)
   * @param {string} [opts.deviceName]      overrides the name (either way made unique in the recorder: " #2"...)
   * @param {number} [opts.ringSize=256]    slots in the ring (made on demand)
   * @param {number} [opts.passesPerSlot=16] passes one slot holds (one query set of 2x that): 1 to 2048
   *                                          (WebGPU's limit is 4,096 queries per query set; RangeError else)
   * @param {bigint} [opts.quantumNs]       known timestamp quantum (default: detected from the stamps)
   * @param {() => bigint} [opts.now]       host clock (default hostClock()); another clock than the recorder's
   *                                        makes the recorder's clock_domain 'unknown' and its taken_ns this clock
   */
  constructor(device, opts = {}) {
    if (!device || typeof device.createCommandEncoder !== 'function') throw new TypeError('wrapDevice: not a GPUDevice');
    const pps = opts.passesPerSlot ?? 16;
    if (!Number.isInteger(pps) || pps < 1 || pps > MAX_PASSES_PER_QUERY_SET) {
      throw new RangeError(`wrapDevice: passesPerSlot must be a whole number from 1 to ${MAX_PASSES_PER_QUERY_SET} ` +
        `(two queries each, at most ${2 * MAX_PASSES_PER_QUERY_SET} per query set): ${String(opts.passesPerSlot)}`);
    }
    this.device = device;
    this.now = opts.now ?? hostClock();
    this.hostClockName = opts.now ? 'unknown' : hostClockName(); // a clock given: not ours to name
    this.recorder = opts.recorder ?? new Recorder({ now: this.now, clockDomain: this.hostClockName });
    if (opts.now && this.recorder.now !== opts.now) {
      // The spans are on the timer's clock, which the recorder's clock_domain does not name: the file says
      // 'unknown' (merge then keeps it on its own clock) and taken_ns is read from the spans' clock.
      this.recorder.clockDomain = 'unknown';
      this.recorder.now = opts.now;
    }
    // unique in the recorder: two devices of one model on one recorder stay two devices
    this.name = this.recorder.deviceLabel(opts.deviceName ?? adapterName(opts.adapterInfo ?? device.adapterInfo), device);
    this.ringSize = opts.ringSize ?? 256;
    this.passesPerSlot = pps;
    this.knownQuantum = opts.quantumNs !== undefined ? BigInt(opts.quantumNs) : null;
    this.timestamps = !!(device.features && device.features.has('timestamp-query'));
    this.model = new ClockModel();
    this.stampGcd = 0n;          // gcd of every device stamp read: the quantum
    this.stampCount = 0;         // stamps read
    this.slots = [];             // every slot made (made on demand up to ringSize)
    this.free = [];              // slots ready for use
    this.cbSlots = new WeakMap(); // command buffer -> slots its encoder filled
    this.inflight = new Set();   // promises of submits not yet read back
    this.unsubmitted = new Set(); // slots filled by encoders whose command buffer was not submitted yet
    this.isLost = false;
    this.closed = false;         // close() ran: encoders made before it pass their work through untimed
    this.batch = [];             // submits ({slots, h0}) whose read-back has not started
    this.drainQueued = false;    // a microtask will start it
    this.queueIndex = this.recorder.queue(this.name, 'GPUQueue');
    this.recorder.device(this.name, () => this.deviceFacts());
    this.pendingSource = () => this._pending();
    this.recorder.pending.add(this.pendingSource);
    // Encoders and command buffers the program drops unsubmitted: their slots come back when they are collected
    this.reaper = typeof FinalizationRegistry === 'function' ? new FinalizationRegistry((held) => this._reap(held)) : null;
    this.lost = device.lost ? device.lost.then((info) => { this.isLost = true; return info; }) : new Promise(() => {});
    this._install();
  }

  /** Timestamp quantum in ns: known, else the gcd of the stamps read so far (1 until two stamps were read). */
  get quantumNs() {
    if (this.knownQuantum !== null) return this.knownQuantum;
    return this.stampCount >= 2 && this.stampGcd > 0n ? this.stampGcd : 1n;
  }

  /** Clock facts of the device as the snapshot's devices[] wants them. */
  deviceFacts() {
    const last = this.model.size ? this.model.map(this.model.samples[this.model.size - 1].device) : null;
    return {
      clockDomain: 'device', resolutionNs: this.quantumNs, frequencyHz: 1000000000n, validBits: 64,
      errorBoundNs: last ? last.bound + this.quantumNs : 0n, driftPpm: this.model.driftPpm,
      modelSamples: this.model.size, hostClock: this.hostClockName,
    };
  }

  // -------------------------------------------------------------------------------------------------------
  // Patching the device's objects
  // -------------------------------------------------------------------------------------------------------

  _install() {
    const device = this.device, queue = device.queue, self = this;
    const createCommandEncoder = device.createCommandEncoder;
    const submit = queue.submit;
    this.raw = {
      createCommandEncoder: (desc) => createCommandEncoder.call(device, desc),
      submit: (cbs) => submit.call(queue, cbs),
    };
    this._restore = () => {
      device.createCommandEncoder = createCommandEncoder;
      queue.submit = submit;
    };
    device.createCommandEncoder = function (desc) {
      const enc = createCommandEncoder.call(device, desc);
      self._patchEncoder(enc);
      return enc;
    };
    queue.submit = function (cbs) { return self._submit(cbs); };
  }

  _patchEncoder(enc) {
    const begin = enc.beginComputePass, finish = enc.finish, self = this;
    const st = { slots: [], cur: null };
    if (this.reaper) this.reaper.register(enc, st); // st.slots: those of its passes not finished yet
    enc.beginComputePass = function (desc) { return self._begin(enc, begin, st, desc || {}); };
    enc.finish = function (desc) { return self._finish(enc, finish, st, desc); };
  }

  _takeSlot() {
    let s = this.free.pop();
    if (!s && this.slots.length < this.ringSize && !this.isLost) {
      const n = this.passesPerSlot, d = this.device;
      s = {
        querySet: d.createQuerySet({ type: 'timestamp', count: 2 * n, label: 'ktiming queries' }),
        resolve: d.createBuffer({ size: 16 * n, usage: USAGE_QUERY_RESOLVE | USAGE_COPY_SRC, label: 'ktiming resolve' }),
        read: d.createBuffer({ size: 16 * n, usage: USAGE_MAP_READ | USAGE_COPY_DST, label: 'ktiming read-back' }),
        passes: [],
      };
      this.slots.push(s);
    }
    return s || null;
  }

  _begin(enc, begin, st, desc) {
    const pass = { label: desc.label || '', pipeline: '', enqueue: this.now(), slot: null, index: 0, why: null };
    let d = desc;
    if (desc.timestampWrites) pass.why = 'no_timing'; // the program times this pass itself: left alone
    else if (!this.timestamps || this.closed) pass.why = 'no_timing'; // closed: an encoder made before close()
    else {
      if (!st.cur || st.cur.passes.length >= this.passesPerSlot) {
        st.cur = this._takeSlot();
        if (st.cur) {
          st.slots.push(st.cur);
          this.unsubmitted.add(st.cur);
        }
      }
      if (!st.cur) pass.why = 'ring_full';
      else {
        pass.slot = st.cur;
        pass.index = st.cur.passes.length;
        st.cur.passes.push(pass);
        d = { ...desc, timestampWrites: { querySet: st.cur.querySet, beginningOfPassWriteIndex: 2 * pass.index,
          endOfPassWriteIndex: 2 * pass.index + 1 } };
      }
    }
    const p = begin.call(enc, d);
    if (!pass.label) { // the kernel's name comes from the first pipeline set
      const setPipeline = p.setPipeline;
      p.setPipeline = function (pipeline) {
        if (!pass.pipeline && pipeline && pipeline.label) pass.pipeline = pipeline.label;
        return setPipeline.call(p, pipeline);
      };
    }
    if (pass.why) { // untimed: counted when the pass ends (its name is known then)
      const end = p.end, self = this;
      p.end = function () {
        self.recorder.drop(self._entry(pass), pass.why);
        return end.call(p);
      };
    }
    return p;
  }

  _kernelName(pass) { return pass.label || pass.pipeline || '(unnamed pass)'; }

  _entry(pass) { return this.recorder.kernel(this._kernelName(pass), this.name); }

  _finish(enc, finish, st, desc) {
    if (this.closed) { // its slots' passes were counted never_submitted by close()
      st.slots = [];
      st.cur = null;
      return finish.call(enc, desc);
    }
    for (const s of st.slots) {
      const n = s.passes.length;
      enc.resolveQuerySet(s.querySet, 0, 2 * n, s.resolve, 0);
      enc.copyBufferToBuffer(s.resolve, 0, s.read, 0, 16 * n);
    }
    const cb = finish.call(enc, desc);
    if (st.slots.length) {
      this.cbSlots.set(cb, st.slots);
      if (this.reaper) this.reaper.register(cb, st.slots, st.slots); // unregistered when submitted
    }
    st.slots = [];
    st.cur = null;
    return cb;
  }

  _submit(cbs) {
    if (this.closed) return this.raw.submit(cbs);
    const h0 = this.now();
    const r = this.raw.submit(cbs);
    let slots = null;
    for (const cb of cbs || []) {
      const s = this.cbSlots.get(cb);
      if (!s) continue;
      this.cbSlots.delete(cb); // a command buffer is submitted once
      if (this.reaper) this.reaper.unregister(s);
      (slots ||= []).push(...s);
    }
    if (slots) {
      for (const s of slots) this.unsubmitted.delete(s);
      this.batch.push({ slots, h0 });
      if (!this.drainQueued) { // one completion wait for every submit made before the program yields
        this.drainQueued = true;
        queueMicrotask(() => this._drain());
      }
    }
    return r;
  }

  // Starts the read-back of the submits batched so far.
  _drain() {
    this.drainQueued = false;
    if (!this.batch.length) return;
    const groups = this.batch;
    this.batch = [];
    // _complete() counts every failure itself; this catch is the last guard: whatever is still unrecorded is counted
    const p = this._complete(groups).catch(() => this._dropAll(groups, this.isLost ? 'device_lost' : 'read_failed'));
    this.inflight.add(p);
    p.finally(() => this.inflight.delete(p));
  }

  // An encoder (held: its state) or a command buffer (held: its slots) was garbage-collected: the passes of its
  // slots not submitted can never run, so they are counted never_submitted and the slots go back to the ring
  // (their read-back buffers were cleared before the slots were handed out, and nothing has written them since).
  _reap(held) {
    if (this.closed) return; // close() counted them
    for (const s of Array.isArray(held) ? held : held.slots) {
      if (!this.unsubmitted.delete(s)) continue;
      for (const pass of s.passes) this.recorder.drop(this._entry(pass), 'never_submitted');
      s.passes = [];
      if (!this.isLost) this.free.push(s);
    }
  }

  // The passes of command buffers not submitted yet and of encoders still open: a snapshot counts them
  // never_submitted as of its moment (a later one records them if they are submitted meanwhile).
  _pending() {
    const out = [];
    for (const s of this.unsubmitted) for (const pass of s.passes) out.push([this._kernelName(pass), this.name, 'never_submitted']);
    return out;
  }

  // -------------------------------------------------------------------------------------------------------
  // Read-back, after the submit
  // -------------------------------------------------------------------------------------------------------

  // Resolves to 'lost' if the device is lost first (nothing waits forever on a destroyed device).
  _orLost(promise) { return Promise.race([promise, this.lost.then(() => 'lost')]); }

  _dropAll(groups, reason) {
    for (const s of groups.flatMap((g) => g.slots)) {
      for (const pass of s.passes) this.recorder.drop(this._entry(pass), reason);
      s.passes = [];
    }
  }

  // Waits for the submits of `groups` ({slots, h0}) to complete, maps their read-back buffers and records. Any
  // failure on the way (a wait, a map, reading a mapped range: the device may be destroyed between the map and
  // the read) counts every pass not recorded yet, device_lost or read_failed: none is lost uncounted.
  async _complete(groups) {
    const slots = groups.flatMap((g) => g.slots);
    try {
      if (this.isLost || (await this._orLost(this.device.queue.onSubmittedWorkDone())) === 'lost') throw LOST;
      const h1 = this.now();
      const maps = slots.map((s) => s.read.mapAsync(MAP_READ, 0, 16 * s.passes.length));
      maps.forEach((m) => m.catch(() => {})); // a map failing after the race is decided is not an unhandled rejection
      if ((await this._orLost(Promise.all(maps))) === 'lost') throw LOST;
      for (const g of groups) {
        const stamps = g.slots.map((s) => new BigUint64Array(s.read.getMappedRange(0, 16 * s.passes.length).slice(0)));
        this._place(g.slots, stamps, g.h0, h1);
        for (const s of g.slots) s.passes = []; // recorded: a later failure does not count them again
      }
    } catch (e) {
      this._dropAll(groups, e === LOST ? 'device_lost' : await this._failureReason());
    }
    for (const s of slots) {
      try { s.read.unmap(); } catch { /* not mapped, or the device is gone */ }
    }
    if (this.isLost) return; // the slots die with the device
    this._recycle(slots);
  }

  // Returns read-back slots to the ring, their read-back buffers cleared first (one command buffer on the queue,
  // ahead of any later use): a later submit the device rejects (a validation error: nothing of it runs, not even
  // the resolve and copy) then reads zeros, counted invalid_times, never the previous pass's stamps again.
  _recycle(slots) {
    try {
      const enc = this.raw.createCommandEncoder({ label: 'ktiming clear' });
      for (const s of slots) enc.clearBuffer(s.read);
      this.raw.submit([enc.finish()]);
    } catch {
      return; // the device is going away: a slot that cannot be cleared is not reused
    }
    for (const s of slots) {
      s.passes = [];
      this.free.push(s);
    }
  }

  // Why a read-back failed: the device's loss (destroy() reports it on device.lost a moment after the buffers are
  // unusable: a completion wait settles that race), else read_failed.
  async _failureReason() {
    if (this.isLost) return 'device_lost';
    let r = null;
    try { r = await this._orLost(this.device.queue.onSubmittedWorkDone()); } catch { /* a lost device may reject */ }
    return r === 'lost' || this.isLost ? 'device_lost' : 'read_failed';
  }

  // Records the passes of one submit: durations from the stamps, placed on the host timeline by the model.
  _place(slots, stamps, h0, h1) {
    const valid = [];
    let t0 = null, t1 = null;
    slots.forEach((s, k) => {
      s.passes.forEach((pass, i) => {
        const b = stamps[k][2 * i], e = stamps[k][2 * i + 1];
        if (b === 0n || e < b) { // not written, or out of order: nothing trustworthy to record
          this.recorder.drop(this._entry(pass), 'invalid_times');
          return;
        }
        this._noteStamps(b, e);
        valid.push({ pass, b, e });
        if (t0 === null || b < t0) t0 = b;
        if (t1 === null || e > t1) t1 = e;
      });
    });
    if (!valid.length) return;
    // The first stamp happened in [h0, h1 - (t1 - t0)] on the host.
    this.model.add(t0, h0, h1 - (t1 - t0));
    for (const { pass, b, e } of valid) {
      const dur = e - b;
      const p = this.place(b, dur, h0, h1);
      this.recorder.record(this._entry(pass), {
        duration: dur, start: p.start, end: p.start + dur, flags: SPAN_DEVICE, queue: this.queueIndex,
        enqueue: pass.enqueue, submit: h0, uncertainty: p.bound, done: h1,
      });
    }
  }

  // Notes device stamps read (the quantum is their gcd).
  _noteStamps(...v) {
    for (const x of v) this.stampGcd = gcd(this.stampGcd, x);
    this.stampCount += v.length;
  }

  /**
   * Host placement of device work that began at stamp `b` and lasted `dur`, submitted at host time h0 and seen
   * complete at h1: the model's mapping (the bracket's start before the model has a sample), kept inside
   * [h0, h1] (a hard limit: work cannot start before its submit or end after the wait), with its bound plus the
   * timestamp quantum.
   */
  place(b, dur, h0, h1) {
    // No model yet (the brackets so far could not hold their stamps: quantised stamps spanning more than the
    // bracket): the bracket itself, the work began in [h0, h1] give or take the quantum
    const m = this.model.map(b) ?? { host: h0, bound: h1 - h0 };
    let start = m.host;
    if (h1 - h0 >= dur) {
      if (start < h0) start = h0;
      if (start + dur > h1) start = h1 - dur;
    }
    return { start, bound: m.bound + this.quantumNs };
  }

  // -------------------------------------------------------------------------------------------------------
  // Public
  // -------------------------------------------------------------------------------------------------------

  /** Waits until every submitted pass is read back and recorded (or counted dropped). */
  async flush() {
    this._drain();
    while (this.inflight.size) await Promise.all([...this.inflight]);
  }

  /**
   * Flushes, counts the passes of command buffers not submitted yet and of encoders still open (never_submitted),
   * restores the device's methods and frees the query sets and buffers the program no longer needs: those of such
   * command buffers and encoders stay alive, so that the program may still submit them (untimed). Encoders made
   * before close() pass their work through untimed afterwards, each pass counted no_timing. The recorder keeps
   * everything recorded. A second call does nothing.
   */
  async close() {
    await this.flush();
    if (this.closed) return;
    this.closed = true;
    this.recorder.pending.delete(this.pendingSource);
    for (const s of this.unsubmitted) {
      for (const pass of s.passes) this.recorder.drop(this._entry(pass), 'never_submitted');
      s.passes = [];
    }
    this._restore();
    for (const s of this.slots) {
      if (this.unsubmitted.has(s)) continue; // a command buffer still uses it: freed with it (garbage collection)
      try { s.querySet.destroy(); s.resolve.destroy(); s.read.destroy(); } catch { /* device already gone */ }
    }
    this.unsubmitted.clear();
    this.slots = [];
    this.free = [];
  }

  /**
   * A Gridwise primitive on this device: `kernels` ({name, record(pass, trial)}) in execution order.
   * @returns {Primitive}
   */
  primitive(name, kernels) { return new Primitive(this, name, kernels); }

  /** The snapshot JSON text (ktiming.snapshot v3) of this timer's recorder. */
  snapshotJSON() { return this.recorder.toJSON(); }

  /** The Chrome trace JSON text of this timer's recorder. */
  chromeTraceJSON() { return this.recorder.toChromeTrace(); }
}
