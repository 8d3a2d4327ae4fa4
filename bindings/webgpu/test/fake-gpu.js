// fake-gpu.js — a test double of the WebGPU objects the timer touches (device, encoder, pass, queue, query set,
// buffers), with a device clock the test drives. Clearly a double: it runs no shader. Lets the timer's logic
// (counts, ring, read-back, placement, device loss) be checked exactly, without a GPU and without wall-clock time.
//
// Model: every submit runs its passes when the test calls gpu.complete(): each pass takes `passNs` of device
// time (device clock = host clock + offset, optionally quantised), then onSubmittedWorkDone promises resolve.

export class FakeGPU {
  constructor({ offset = 1_000_000_000_000n, passNs = 1000n, quantum = 1n, hostStep = 10n, auto = false,
    hostStart = 5_000_000n } = {}) {
    this.auto = auto;        // complete() by itself whenever a completion is awaited
    this.host = hostStart;   // host clock (ns), advanced by hostStep at every read
    this.hostStep = hostStep;
    this.offset = offset;    // device clock - host clock
    this.passNs = passNs;
    this.quantum = quantum;
    this.queued = [];        // submitted command buffers not yet run
    this.waiters = [];       // onSubmittedWorkDone resolvers
    this.lostResolve = null;
    this.destroyed = false;
    this.rejected = 0;       // submits rejected (validation)
    this.onMap = null;       // called at every mapAsync (a test's hook: destroy the device as a read-back lands)
    this.ran = [];           // {label, begin, end} host times of passes run
    this.device = this._device();
  }

  now() { this.host += this.hostStep; return this.host; }

  _stamp(host) { const d = host + this.offset; return (d / this.quantum) * this.quantum; }

  _device() {
    const gpu = this;
    const queue = {
      // As WebGPU's validation: a submit holding an invalid command buffer (one a test marks invalid, or one using a
      // destroyed buffer or query set) is rejected whole, nothing of it runs.
      submit(cbs) {
        if (gpu.destroyed) return;
        if (cbs.some((cb) => cb.invalid || cb.ops.some(usesDestroyed))) {
          gpu.rejected++;
          return;
        }
        for (const cb of cbs) gpu.queued.push(cb);
      },
      onSubmittedWorkDone() {
        if (gpu.destroyed) return new Promise(() => {}); // never resolves: the timer must not wait on it
        if (!gpu.queued.length) return Promise.resolve(); // nothing in flight: done at once, as on a real queue
        const p = new Promise((r) => gpu.waiters.push(r));
        if (gpu.auto) setImmediate(() => gpu.complete());
        return p;
      },
      writeBuffer() {},
    };
    return {
      features: new Set(['timestamp-query']),
      adapterInfo: { description: 'Fake GPU "test double"' },
      queue,
      lost: new Promise((r) => { gpu.lostResolve = r; }),
      createQuerySet: ({ count }) => ({ stamps: new BigUint64Array(count), destroyed: false, destroy() { this.destroyed = true; } }),
      createBuffer: ({ size }) => gpu._buffer(size),
      createCommandEncoder: () => gpu._encoder(),
      // As Dawn: destroyed at once (mapped ranges unusable), device.lost resolved a little later (a task after)
      destroy() {
        gpu.destroyed = true;
        setImmediate(() => gpu.lostResolve({ reason: 'destroyed', message: 'fake device destroyed' }));
      },
    };
  }

  _buffer(size) {
    const gpu = this;
    return {
      data: new ArrayBuffer(size), mapState: 'unmapped',
      mapAsync() {
        if (gpu.destroyed) return Promise.reject(new Error('device destroyed'));
        if (this.mapState !== 'unmapped') return Promise.reject(new Error('OperationError: the buffer is already mapped'));
        this.mapState = 'mapped';
        if (gpu.onMap) gpu.onMap();
        return Promise.resolve();
      },
      getMappedRange(off = 0, len = size) {
        if (gpu.destroyed) throw new Error('OperationError: the buffer\'s device was destroyed');
        return this.data.slice(off, off + len);
      },
      unmap() { this.mapState = 'unmapped'; },
      destroyed: false,
      destroy() { this.destroyed = true; },
    };
  }

  _encoder() {
    const ops = [];
    return {
      beginComputePass(desc = {}) {
        const p = { desc, pipeline: null, groups: [], dispatches: 0 };
        ops.push({ op: 'pass', p });
        return {
          setPipeline(pl) { p.pipeline = pl; }, setBindGroup(i, g) { p.groups.push(g); }, dispatchWorkgroups() { p.dispatches++; },
          end() {},
        };
      },
      resolveQuerySet(qs, first, count, buf, off) { ops.push({ op: 'resolve', qs, first, count, buf, off }); },
      copyBufferToBuffer(src, so, dst, dof, size) { ops.push({ op: 'copy', src, so, dst, dof, size }); },
      clearBuffer(buf, off = 0, size = buf.data.byteLength - off) { ops.push({ op: 'clear', buf, off, size }); },
      finish() { return { ops }; },
    };
  }

  /** Runs every queued command buffer in order, then resolves the pending onSubmittedWorkDone promises. */
  async complete() {
    await Promise.resolve(); // the timer asks for completion in a microtask after the submits
    for (const cb of this.queued) {
      for (const o of cb.ops) {
        if (o.op === 'pass') {
          const b = this.now(), e = b + this.passNs;
          this.host = e;
          const tw = o.p.desc.timestampWrites;
          if (tw) {
            tw.querySet.stamps[tw.beginningOfPassWriteIndex] = this._stamp(b);
            tw.querySet.stamps[tw.endOfPassWriteIndex] = this._stamp(e);
          }
          this.ran.push({ label: o.p.desc.label || o.p.pipeline?.label || '', begin: b, end: e });
        } else if (o.op === 'resolve') {
          new BigUint64Array(o.buf.data, o.off, o.count).set(o.qs.stamps.subarray(o.first, o.first + o.count));
        } else if (o.op === 'copy') {
          new Uint8Array(o.dst.data, o.dof, o.size).set(new Uint8Array(o.src.data, o.so, o.size));
        } else if (o.op === 'clear') {
          new Uint8Array(o.buf.data, o.off, o.size).fill(0);
        }
      }
    }
    this.queued = [];
    const w = this.waiters;
    this.waiters = [];
    for (const r of w) r();
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r)); // let the read-backs run
  }
}

// Whether a recorded command uses a destroyed buffer or query set (or a bind group a test marks destroyed).
function usesDestroyed(o) {
  if (o.op === 'pass') return !!o.p.desc.timestampWrites?.querySet.destroyed || o.p.groups.some((g) => g && g.destroyed);
  return [o.qs, o.buf, o.src, o.dst].some((r) => r && r.destroyed);
}

/** Records `n` labelled single-dispatch passes, one encoder and submit each. */
export function submitPasses(device, label, n, passesPerEncoder = 1) {
  for (let i = 0; i < n; i += passesPerEncoder) {
    const enc = device.createCommandEncoder();
    for (let k = 0; k < passesPerEncoder && i + k < n; k++) {
      const p = enc.beginComputePass({ label });
      p.dispatchWorkgroups(1);
      p.end();
    }
    device.queue.submit([enc.finish()]);
  }
}
