// primitive.js — Gridwise's primitives (seed 003): a named sequence of kernels timed per kernel and as one unit,
// with trials and the CPU time measured with a drain. The WebGPU counterpart of <ktiming/primitive.h>.
//
// Executing with trials = n runs every kernel's record callback n times in a row inside that kernel's one
// compute pass, whose timestamps bracket all n (timestamps exist only at pass boundaries in WebGPU); the time
// divided by n is the per-dispatch time. CPU timing, as Gridwise does it: await queue.onSubmittedWorkDone()
// (the drain), read the host clock, submit, await onSubmittedWorkDone() again, read the host clock.
// Recorded (unless record: false), one record per execution as the C engine does:
//   "<primitive>/<kernel>"  the kernel's GPU time / n, flags DEVICE (+ TRIALS when n > 1)
//   "<primitive>"           the CPU time / n, flags HOST_TIMED (+ TRIALS); without CPU timing the GPU time of
//                           the whole primitive (first begin to last end) / n, flags DEVICE (+ TRIALS)
// Warm-up executions run the same way and are discarded.

import { SPAN_DEVICE, SPAN_HOST_TIMED, SPAN_TRIALS } from './recorder.js';

const USAGE_MAP_READ = 0x1, USAGE_COPY_SRC = 0x4, USAGE_COPY_DST = 0x8, USAGE_QUERY_RESOLVE = 0x200;
const MAP_READ = 0x1;

/** Timed passes one query set can hold: WebGPU allows at most 4,096 queries in a query set, two per pass. */
export const MAX_PASSES_PER_QUERY_SET = 2048;

export class Primitive {
  /**
   * @param {import('./timer.js').WebGPUTimer} timer  the device's timer (its device, clock model, recorder)
   * @param {string} name
   * @param {{name: string, record: (pass: GPUComputePassEncoder, trial: number) => void}[]} kernels
   *        in execution order; record() records ONE dispatch of its kernel into the pass
   */
  constructor(timer, name, kernels) {
    if (!Array.isArray(kernels) || !kernels.length) throw new TypeError('Primitive: at least one kernel');
    if (kernels.length > MAX_PASSES_PER_QUERY_SET) { // one query set holds the whole primitive's timestamps
      throw new RangeError(`Primitive: at most ${MAX_PASSES_PER_QUERY_SET} kernels (WebGPU's 4,096 queries per query set): ${kernels.length}`);
    }
    for (const k of kernels) {
      if (!k || typeof k.record !== 'function' || !k.name) throw new TypeError('Primitive: each kernel needs name and record()');
    }
    this.timer = timer;
    this.name = String(name);
    this.kernels = kernels.map((k) => ({ name: String(k.name), record: k.record }));
    this.res = null; // query set and buffers, made on first timed execution
    this.tail = Promise.resolve(); // the latest execution: the next one starts after it
  }

  _resources() {
    if (this.res) return this.res;
    const d = this.timer.device, n = this.kernels.length;
    this.res = {
      querySet: d.createQuerySet({ type: 'timestamp', count: 2 * n, label: `ktiming ${this.name}` }),
      resolve: d.createBuffer({ size: 16 * n, usage: USAGE_QUERY_RESOLVE | USAGE_COPY_SRC }),
      read: d.createBuffer({ size: 16 * n, usage: USAGE_MAP_READ | USAGE_COPY_DST }),
    };
    return this.res;
  }

  /**
   * Runs the primitive: `warmup` discarded executions, then one measured.
   * @param {{trials?: number, warmup?: number, gpuTiming?: boolean, cpuTiming?: boolean, record?: boolean}} [opts]
   * @returns {Promise<{trials: number, gpuTotalNs: bigint[], gpuNs: bigint[], unitTotalNs: bigint, unitNs: bigint,
   *   cpuTotalNs: bigint, cpuNs: bigint, startNs: bigint, endNs: bigint}>} gpu*: per kernel (0n without GPU
   *   timing); unit*: first begin to last end; cpu*: the drained host time (0n without CPU timing)
   * Executions of one primitive share its query set and read-back buffer: called again before the last one
   * settled (Promise.all over several), each waits for the one before, so they run one after the other.
   */
  execute(opts = {}) {
    const run = this.tail.then(() => this._execute(opts));
    this.tail = run.catch(() => {}); // a failed execution does not stop the next
    return run;
  }

  async _execute(opts) {
    const trials = opts.trials ?? 1;
    if (!Number.isInteger(trials) || trials < 1) throw new RangeError('execute: trials must be a whole number >= 1');
    const warmup = opts.warmup ?? 0;
    for (let i = 0; i < warmup; i++) await this._once(trials, opts, false);
    return this._once(trials, opts, opts.record !== false);
  }

  async _once(trials, opts, record) {
    const t = this.timer, d = t.device, q = d.queue;
    const wantGpu = opts.gpuTiming !== false;
    const gpu = wantGpu && t.timestamps; // asked for on a device without timestamp-query: counted no_timing
    const cpu = opts.cpuTiming !== false;
    // out.cpuTotalNs is 0n exactly when CPU timing is off (a timed submit and wait take at least 1 ns)
    const res = gpu ? this._resources() : null;
    const enc = t.raw.createCommandEncoder({ label: this.name });
    this.kernels.forEach((k, i) => {
      const desc = { label: `${this.name}/${k.name}` };
      if (gpu) desc.timestampWrites = { querySet: res.querySet, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 };
      const pass = enc.beginComputePass(desc);
      for (let n = 0; n < trials; n++) k.record(pass, n);
      pass.end();
    });
    const n = this.kernels.length;
    if (gpu) {
      enc.resolveQuerySet(res.querySet, 0, 2 * n, res.resolve, 0);
      enc.copyBufferToBuffer(res.resolve, 0, res.read, 0, 16 * n);
    }
    const cb = enc.finish();
    const lost = () => { throw new Error(`${this.name}: the device was lost`); };
    if (cpu && (await t._orLost(q.onSubmittedWorkDone())) === 'lost') lost(); // the drain
    const h0 = t.now();
    t.raw.submit([cb]);
    if ((await t._orLost(q.onSubmittedWorkDone())) === 'lost') lost();
    const h1 = t.now();
    const out = { trials, gpuTotalNs: new Array(n).fill(0n), gpuNs: new Array(n).fill(0n), unitTotalNs: 0n, unitNs: 0n,
      cpuTotalNs: cpu ? h1 - h0 : 0n, cpuNs: cpu ? (h1 - h0) / BigInt(trials) : 0n, startNs: h0, endNs: h1 };
    let stamps = null;
    if (gpu) {
      if ((await t._orLost(res.read.mapAsync(MAP_READ, 0, 16 * n))) === 'lost') lost();
      stamps = new BigUint64Array(res.read.getMappedRange(0, 16 * n).slice(0));
      res.read.unmap();
      this._clear(res);
      const bad = this.kernels.findIndex((k, i) => stamps[2 * i] === 0n || stamps[2 * i + 1] < stamps[2 * i]);
      if (bad >= 0) { // nothing trustworthy in this execution: each kernel counted, the caller told
        if (record) {
          for (const k of this.kernels) t.recorder.drop(t.recorder.kernel(`${this.name}/${k.name}`, t.name), 'invalid_times');
        }
        throw new Error(`${this.name}/${this.kernels[bad].name}: no valid timestamps (not written: was the submit ` +
          'rejected by validation? the device reports why)');
      }
      for (let i = 0; i < n; i++) {
        const b = stamps[2 * i], e = stamps[2 * i + 1];
        t._noteStamps(b, e);
        out.gpuTotalNs[i] = e - b;
        out.gpuNs[i] = (e - b) / BigInt(trials);
      }
      out.unitTotalNs = stamps[2 * n - 1] - stamps[0];
      out.unitNs = out.unitTotalNs / BigInt(trials);
      t.model.add(stamps[0], h0, h1 - out.unitTotalNs);
    }
    if (record) this._record(out, stamps, h0, h1, wantGpu);
    return out;
  }

  // Clears the read-back buffer on the queue, ahead of the next execution: one whose submit the device rejects
  // (nothing of it runs, not even the copy) then reads zeros, never this execution's stamps again.
  _clear(res) {
    try {
      const enc = this.timer.raw.createCommandEncoder({ label: 'ktiming clear' });
      enc.clearBuffer(res.read);
      this.timer.raw.submit([enc.finish()]);
    } catch { /* the device is going away: the next execution fails on it anyway */ }
  }

  _record(out, stamps, h0, h1, wantGpu) {
    const t = this.timer, rec = t.recorder, trialFlag = out.trials > 1 ? SPAN_TRIALS : 0;
    if (!stamps && wantGpu) { // GPU timing asked for, the device has no timestamps: each kernel counted, not lost
      for (const k of this.kernels) rec.drop(rec.kernel(`${this.name}/${k.name}`, t.name), 'no_timing');
    }
    const place = (b, dur) => t.place(b, dur, h0, h1);
    if (stamps) {
      this.kernels.forEach((k, i) => {
        const p = place(stamps[2 * i], out.gpuTotalNs[i]);
        rec.record(rec.kernel(`${this.name}/${k.name}`, t.name), {
          duration: out.gpuNs[i], start: p.start, end: p.start + out.gpuTotalNs[i], flags: SPAN_DEVICE | trialFlag,
          queue: t.queueIndex, submit: h0, uncertainty: p.bound, done: h1,
        });
      });
    }
    if (!stamps && !out.cpuTotalNs) return; // timed neither way: nothing measured, nothing to record
    const self = rec.kernel(this.name, t.name);
    if (out.cpuTotalNs || !stamps) {
      rec.record(self, { duration: out.cpuNs, start: h0, end: h1, flags: SPAN_HOST_TIMED | trialFlag, done: h1 });
    } else {
      const p = place(stamps[0], out.unitTotalNs);
      rec.record(self, { duration: out.unitNs, start: p.start, end: p.start + out.unitTotalNs,
        flags: SPAN_DEVICE | trialFlag, queue: t.queueIndex, submit: h0, uncertainty: p.bound, done: h1 });
    }
  }

  /** Frees the primitive's query set and buffers once the executions already called have settled. */
  destroy() {
    const res = this.res;
    if (!res) return;
    this.res = null; // an execution called later makes its own
    this.tail.then(() => {
      try { res.querySet.destroy(); res.resolve.destroy(); res.read.destroy(); } catch { /* device gone */ }
    });
  }
}
