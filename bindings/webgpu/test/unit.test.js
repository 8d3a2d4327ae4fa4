// unit.test.js — the timer, primitives, clock model and writers on a test-double GPU (fake-gpu.js): exact counts,
// the ring, device loss, quantum, placement bounds that contain the truth, the snapshot format. No GPU needed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import v8 from 'node:v8';
import vm from 'node:vm';
import { FakeGPU, submitPasses } from './fake-gpu.js';
import { wrapDevice, Recorder, ClockModel, histIndex, histLower, histValue, SPAN_DEVICE, SPAN_HOST_TIMED, SPAN_TRIALS }
  from '../src/index.js';

function setup(opts = {}, timerOpts = {}) {
  const gpu = new FakeGPU(opts);
  const now = () => gpu.now();
  const timer = wrapDevice(gpu.device, { recorder: new Recorder({ now, host: 'testhost', pid: 42 }), now, ...timerOpts });
  return { gpu, timer, device: gpu.device };
}

// A full garbage collection on demand (what --expose-gc gives), to check what happens to objects the program drops.
v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc');

const entry = (timer, name) => [...timer.recorder.entries.values()].find((e) => e.name === name);

// Resolves to 'timeout' when p has not settled after the event loop turned `turns` times (no wall clock).
async function settles(p, turns = 200) {
  let done = false;
  p.then(() => { done = true; }, () => { done = true; });
  for (let i = 0; i < turns && !done; i++) await new Promise((r) => setImmediate(r));
  return done;
}

test('histogram buckets are the C library\'s (src/core/hist.h)', () => {
  assert.equal(histIndex(127n), 127);
  assert.equal(histIndex(128n), 128);
  assert.equal(histLower(histIndex(200n)), 200n);
  assert.equal(histLower(histIndex(1000n)), 1000n);
  assert.equal(histLower(histIndex(1001n)), 1000n);
  for (const v of [129n, 4095n, 65536n, 65537n, 123456789n, (1n << 62n) + 12345n]) {
    const i = histIndex(v);
    assert.ok(histLower(i) <= v && v < histLower(i + 1), `bucket of ${v}`);
    const mid = histValue(i);
    assert.ok(mid >= histLower(i) && mid < histLower(i + 1));
  }
});

test('every pass is one dispatch of its kernel, named by the pass label or the pipeline label', async () => {
  const { gpu, timer, device } = setup();
  submitPasses(device, 'alpha', 10, 3);
  for (let i = 0; i < 4; i++) {
    const enc = device.createCommandEncoder();
    const p = enc.beginComputePass();
    p.setPipeline({ label: 'beta_pipeline' });
    p.dispatchWorkgroups(2);
    p.end();
    device.queue.submit([enc.finish()]);
  }
  assert.equal(timer.recorder.spans.length, 0, 'nothing is read back before the work completes');
  await gpu.complete();
  await timer.flush();
  assert.equal(entry(timer, 'alpha').count, 10n);
  assert.equal(entry(timer, 'beta_pipeline').count, 4n);
  assert.equal(entry(timer, 'alpha').sum, 10n * gpu.passNs);
  assert.equal(timer.recorder.spans.length, 14);
  for (const s of timer.recorder.spans) {
    assert.equal(s.flags, SPAN_DEVICE);
    assert.ok(s.submit <= s.start && s.end <= s.done, 'span inside its host bracket');
  }
});

test('the placement bound contains the true host time of every pass', async () => {
  const { gpu, timer, device } = setup({ offset: -3_000_000n, hostStep: 7n });
  for (let round = 0; round < 6; round++) {
    submitPasses(device, 'k', 5);
    await gpu.complete();
  }
  await timer.flush();
  const truth = gpu.ran.filter((r) => r.label === 'k');
  const spans = timer.recorder.spans.filter((s) => s.entry.name === 'k');
  assert.equal(spans.length, truth.length);
  spans.forEach((s, i) => {
    const err = s.start > truth[i].begin ? s.start - truth[i].begin : truth[i].begin - s.start;
    assert.ok(err <= s.uncertainty, `span ${i}: error ${err} > bound ${s.uncertainty}`);
  });
});

test('a full ring is counted as dropped (ring_full), never silent', async () => {
  const { gpu, timer, device } = setup({}, { ringSize: 2, passesPerSlot: 1 });
  submitPasses(device, 'k', 5);
  await gpu.complete();
  await timer.flush();
  const e = entry(timer, 'k');
  assert.equal(e.count, 2n);
  assert.equal(e.droppedTotal(), 3n);
  const snap = JSON.parse(timer.snapshotJSON());
  assert.deepEqual(snap.entries[0].dropped_by, { ring_full: 3 });
  submitPasses(device, 'k', 2); // slots came back after the read-back
  await gpu.complete();
  await timer.flush();
  assert.equal(e.count, 4n);
  assert.equal(e.droppedTotal(), 3n);
});

test('a quantised device clock is detected and carried into every span\'s uncertainty', async () => {
  const { gpu, timer, device } = setup({ quantum: 65536n, passNs: 300_000n });
  submitPasses(device, 'q', 8);
  await gpu.complete();
  await timer.flush();
  assert.equal(timer.quantumNs, 65536n);
  for (const s of timer.recorder.spans) {
    assert.equal(s.duration % 65536n, 0n);
    assert.ok(s.uncertainty >= 65536n);
  }
  const dev = JSON.parse(timer.snapshotJSON()).devices[0];
  assert.equal(dev.resolution_ns, 65536);
  const fine = setup({ passNs: 300_001n });
  submitPasses(fine.device, 'q', 8);
  await fine.gpu.complete();
  await fine.timer.flush();
  assert.ok(fine.timer.quantumNs < 16n, `unquantised clock read as quantum ${fine.timer.quantumNs}`);
});

test('a first submit whose quantised stamps span more than its host bracket is recorded, placed within that bracket', async () => {
  // the pass begins 500 ns before a multiple of the 65,536 ns quantum and lasts 1,000 ns: its stamps read a whole
  // quantum, more than its host bracket, so the clock model takes no sample from it and has none yet
  const { gpu, timer, device } = setup({ quantum: 65536n, passNs: 1000n, offset: (1n << 24n) * 65536n - 5_000_500n });
  submitPasses(device, 'straddle', 1);
  await gpu.complete();
  await timer.flush();
  const e = entry(timer, 'straddle');
  assert.equal(e.count, 1n);
  assert.equal(e.droppedTotal(), 0n);
  assert.equal(e.sum, 65536n);
  const [s] = timer.recorder.spans;
  const truth = gpu.ran[0].begin;
  assert.ok(s.submit <= s.start && s.start <= s.done, 'placed inside its bracket');
  assert.ok((s.start > truth ? s.start - truth : truth - s.start) <= s.uncertainty, 'the bound holds the true begin');
});

test('a device lost mid-run: nothing hangs, the passes in flight are counted device_lost', async () => {
  const { gpu, timer, device } = setup();
  submitPasses(device, 'k', 3);
  await gpu.complete();
  await timer.flush();
  submitPasses(device, 'k', 4);
  device.destroy();
  assert.ok(await settles(timer.flush()), 'flush() settles after the device is lost');
  const e = entry(timer, 'k');
  assert.equal(e.count, 3n);
  assert.equal(e.dropped[5], 4n); // device_lost
  assert.ok(await settles(timer.close()));
});

test('a device destroyed as the read-back lands: every pass is recorded or counted device_lost', async () => {
  const { gpu, timer, device } = setup();
  submitPasses(device, 'k', 6);
  // the program destroys the device right after the timer's maps were granted, before it reads them (report item 1)
  gpu.onMap = () => { gpu.onMap = null; queueMicrotask(() => device.destroy()); };
  await gpu.complete();
  assert.ok(await settles(timer.flush()), 'flush() settles');
  const e = entry(timer, 'k');
  assert.ok(e, 'the passes have an entry');
  assert.equal(e.count, 0n);
  assert.equal(e.dropped[5], 6n); // device_lost
  assert.ok(await settles(timer.close()));
});

test('a submit the device rejects: its passes are counted, never recorded from a reused slot\'s old stamps', async () => {
  const { gpu, timer, device } = setup({}, { ringSize: 1 });
  submitPasses(device, 'good', 1);
  await gpu.complete();
  await timer.flush();
  const enc = device.createCommandEncoder(); // takes the one slot again
  enc.beginComputePass({ label: 'never_ran' }).end();
  const cb = enc.finish();
  cb.invalid = true;                         // fails validation: the whole submit is rejected, nothing runs
  device.queue.submit([cb]);
  await gpu.complete();
  await timer.flush();
  assert.equal(gpu.rejected, 1);
  const e = entry(timer, 'never_ran');
  assert.equal(e.count, 0n, 'not recorded with the earlier pass\'s stamps');
  assert.equal(e.dropped[10], 1n);           // invalid_times: its stamps were never written
  assert.equal(timer.model.count, 1, 'nothing fed to the clock model');
  submitPasses(device, 'good', 1);           // the slot serves again
  await gpu.complete();
  await timer.flush();
  assert.equal(entry(timer, 'good').count, 2n);
  assert.equal(timer.model.count, 2);
});

test('passes never submitted are counted at close; passes the program times itself are left alone', async () => {
  const { gpu, timer, device } = setup();
  const enc = device.createCommandEncoder();
  enc.beginComputePass({ label: 'orphan' }).end();
  enc.finish(); // never submitted
  const own = device.createCommandEncoder();
  own.beginComputePass({ label: 'own', timestampWrites: { querySet: device.createQuerySet({ count: 2 }),
    beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 } }).end();
  device.queue.submit([own.finish()]);
  await gpu.complete();
  await timer.close();
  assert.equal(entry(timer, 'orphan').dropped[4], 1n); // never_submitted
  assert.equal(entry(timer, 'own').dropped[8], 1n);    // no_timing
  assert.equal(entry(timer, 'own').count, 0n);
  assert.equal(typeof device.createCommandEncoder().beginComputePass, 'function');
  assert.ok(!Object.prototype.hasOwnProperty.call(device.createCommandEncoder(), 'finish') ||
    device.createCommandEncoder().finish.name === 'finish', 'close() restored the device');
});

test('close() leaves a command buffer not yet submitted and an encoder still open working', async () => {
  const { gpu, timer, device } = setup();
  const enc = device.createCommandEncoder();
  enc.beginComputePass({ label: 'pending' }).end();
  const cb = enc.finish();                    // submitted only after close()
  const open = device.createCommandEncoder(); // created before close(), used after it
  await timer.close();
  assert.equal(entry(timer, 'pending').dropped[4], 1n); // never_submitted: not submitted when close() ran
  device.queue.submit([cb]);
  const p = open.beginComputePass({ label: 'after_close' });
  p.dispatchWorkgroups(1);
  p.end();
  device.queue.submit([open.finish()]);
  await gpu.complete();
  assert.equal(gpu.rejected, 0, 'no submit of the program is rejected');
  assert.deepEqual(gpu.ran.map((r) => r.label), ['pending', 'after_close'], 'the program\'s work ran');
  const late = entry(timer, 'after_close');
  assert.ok(late, 'a pass begun after close() on an earlier encoder is counted');
  assert.equal(late.dropped[8], 1n);          // no_timing
  assert.equal(late.count, 0n);
  assert.equal(timer.slots.length, 0, 'no slot made after close()');
  assert.equal(entry(timer, 'pending').count, 0n);
});

test('a snapshot while a command buffer is not submitted yet counts its passes never_submitted, as of then', async () => {
  const { gpu, timer, device } = setup();
  const enc = device.createCommandEncoder();
  enc.beginComputePass({ label: 'later' }).end();
  const cb = enc.finish();
  const open = device.createCommandEncoder(); // still recording when the snapshot is taken
  open.beginComputePass({ label: 'open' }).end();
  submitPasses(device, 'now', 1);
  await gpu.complete();
  await timer.flush();
  let s = JSON.parse(timer.snapshotJSON());
  const by = (name) => s.entries.find((e) => e.name === name);
  assert.deepEqual([by('later').dispatch_count, by('later').dropped, by('later').dropped_by], [0, 1, { never_submitted: 1 }]);
  assert.deepEqual(by('open').dropped_by, { never_submitted: 1 });
  assert.equal(by('now').dispatch_count, 1);
  assert.equal(entry(timer, 'later'), undefined, 'as of the snapshot: nothing kept in the recorder');
  device.queue.submit([cb, open.finish()]); // submitted after all: recorded, no longer counted
  await gpu.complete();
  await timer.flush();
  s = JSON.parse(timer.snapshotJSON());
  for (const name of ['later', 'open']) assert.deepEqual([by(name).dispatch_count, by(name).dropped], [1, 0]);
  await timer.close();
});

// Encoders (one finished, one not) the program drops without submitting; nothing else references them.
function abandon(device, label) {
  const a = device.createCommandEncoder();
  a.beginComputePass({ label }).end();
  a.finish();
  device.createCommandEncoder().beginComputePass({ label }).end();
}

test('abandoned encoders and command buffers: counted never_submitted and their slots back once collected', async () => {
  const { gpu, timer, device } = setup({}, { ringSize: 2, passesPerSlot: 1 });
  abandon(device, 'abandoned');
  for (let i = 0; i < 100 && entry(timer, 'abandoned')?.dropped[4] !== 2n; i++) {
    gc();
    await new Promise((r) => setImmediate(r)); // finalisation callbacks run in a task after the collection
  }
  assert.equal(entry(timer, 'abandoned')?.dropped[4], 2n, 'counted never_submitted when collected');
  submitPasses(device, 'work', 2);
  await gpu.complete();
  await timer.flush();
  assert.equal(entry(timer, 'work').count, 2n, 'the ring has its two slots back (no ring_full)');
  assert.equal(JSON.parse(timer.snapshotJSON()).entries.find((e) => e.name === 'abandoned').dropped, 2);
  await timer.close();
  assert.equal(entry(timer, 'abandoned').droppedTotal(), 2n, 'counted once');
});

test('a primitive: trials in one pass per kernel, time / trials, warm-up discarded, CPU time with a drain', async () => {
  const { gpu, timer } = setup({ auto: true, passNs: 4000n });
  const calls = { a: 0, b: 0 };
  const prim = timer.primitive('scan', [
    { name: 'up', record: (pass, trial) => { calls.a++; pass.dispatchWorkgroups(1); assert.ok(trial >= 0); } },
    { name: 'down', record: (pass) => { calls.b++; pass.dispatchWorkgroups(1); } },
  ]);
  const r = await prim.execute({ trials: 4, warmup: 2 });
  assert.equal(calls.a, 12);
  assert.equal(calls.b, 12);
  assert.equal(r.trials, 4);
  assert.deepEqual(r.gpuTotalNs, [4000n, 4000n]); // the fake runs a pass in passNs whatever it holds
  assert.deepEqual(r.gpuNs, [1000n, 1000n]);
  assert.ok(r.unitTotalNs >= 8000n);
  assert.ok(r.cpuTotalNs > 0n && r.cpuNs === r.cpuTotalNs / 4n);
  assert.equal(entry(timer, 'scan/up').count, 1n, 'warm-up executions are not recorded');
  assert.equal(entry(timer, 'scan/up').sum, 1000n);
  assert.equal(entry(timer, 'scan').count, 1n);
  const flags = Object.fromEntries(timer.recorder.spans.map((s) => [s.entry.name, s.flags]));
  assert.equal(flags['scan/up'], SPAN_DEVICE | SPAN_TRIALS);
  assert.equal(flags.scan, SPAN_HOST_TIMED | SPAN_TRIALS);
  const g = await prim.execute({ trials: 1, cpuTiming: false });
  assert.equal(g.cpuTotalNs, 0n);
  assert.equal(entry(timer, 'scan').last, g.unitNs, 'without CPU timing the unit is the GPU time');
  const none = await prim.execute({ gpuTiming: false, cpuTiming: false });
  assert.deepEqual([none.gpuTotalNs, none.cpuTotalNs], [[0n, 0n], 0n]);
  assert.equal(entry(timer, 'scan').count, 2n, 'an execution timed neither way records nothing');
  await assert.rejects(prim.execute({ trials: 0 }), RangeError);
});

test('executions of one primitive at once run one after the other, each with its own stamps', async () => {
  const { gpu, timer } = setup({ auto: true, passNs: 3000n });
  const prim = timer.primitive('p', [{ name: 'k', record: (pass) => pass.dispatchWorkgroups(1) }]);
  const rs = await Promise.allSettled([1, 2, 3].map(() => prim.execute({ trials: 2 })));
  assert.deepEqual(rs.map((r) => r.status), ['fulfilled', 'fulfilled', 'fulfilled'], String(rs.map((r) => r.reason)));
  for (const r of rs) assert.deepEqual(r.value.gpuTotalNs, [3000n]);
  const [a, b, c] = rs.map((r) => r.value);
  assert.ok(a.endNs <= b.startNs && b.endNs <= c.startNs, 'in call order, not overlapping');
  assert.equal(entry(timer, 'p/k').count, 3n);
  assert.equal(entry(timer, 'p').count, 3n);
  await assert.rejects(prim.execute({ trials: 0 }), RangeError); // a refused call does not stop the next
  assert.deepEqual((await prim.execute()).gpuTotalNs, [3000n]);
});

test('a primitive execution whose submit is rejected: an error and invalid_times, not the last execution\'s stamps', async () => {
  const { gpu, timer } = setup({ auto: true, passNs: 3000n });
  const group = { destroyed: false }; // a bind group whose buffer the program destroys
  const prim = timer.primitive('p', [{ name: 'k', record: (pass) => { pass.setBindGroup(0, group); pass.dispatchWorkgroups(1); } }]);
  assert.deepEqual((await prim.execute()).gpuTotalNs, [3000n]);
  group.destroyed = true;             // the next submit is rejected: nothing of it runs
  await assert.rejects(prim.execute(), /p\/k: no valid timestamps/);
  assert.equal(gpu.rejected, 1);
  assert.equal(entry(timer, 'p/k').count, 1n, 'the rejected execution is not recorded');
  assert.equal(entry(timer, 'p/k').dropped[10], 1n); // invalid_times
  group.destroyed = false;
  assert.deepEqual((await prim.execute()).gpuTotalNs, [3000n]);
  assert.equal(entry(timer, 'p/k').count, 2n);
});

test('a primitive on a device without timestamp-query counts each kernel no_timing', async () => {
  const gpu = new FakeGPU({ auto: true });
  gpu.device.features = new Set(); // requested without 'timestamp-query'
  const now = () => gpu.now();
  const timer = wrapDevice(gpu.device, { recorder: new Recorder({ now }), now });
  const prim = timer.primitive('prim', [{ name: 'a', record: (p) => p.dispatchWorkgroups(1) },
    { name: 'b', record: (p) => p.dispatchWorkgroups(1) }]);
  const r = await prim.execute({ trials: 3, warmup: 1 });
  assert.deepEqual(r.gpuTotalNs, [0n, 0n]);
  for (const k of ['prim/a', 'prim/b']) {
    const e = entry(timer, k);
    assert.ok(e, `${k} is in the snapshot`);
    assert.equal(e.count, 0n);
    assert.equal(e.dropped[8], 1n, `${k}: no_timing, the warm-up not counted`); // no_timing
  }
  assert.equal(entry(timer, 'prim').count, 1n, 'the CPU time is recorded');
  await prim.execute({ gpuTiming: false });   // GPU timing not asked for: nothing to count
  assert.equal(entry(timer, 'prim/a').droppedTotal(), 1n);
  await timer.close();
});

test('a slot or a primitive past WebGPU\'s 4,096 queries per query set is refused at once (RangeError)', () => {
  for (const v of [0, -1, 1.5, NaN, '16', 2049, 4096]) {
    const gpu = new FakeGPU();
    const submit = gpu.device.queue.submit;
    assert.throws(() => wrapDevice(gpu.device, { passesPerSlot: v }), RangeError, `passesPerSlot ${v}`);
    assert.equal(gpu.device.queue.submit, submit, 'a refused timer patches nothing');
  }
  const timer = wrapDevice(new FakeGPU().device, { passesPerSlot: 2048 });
  const k = { name: 'k', record() {} };
  assert.throws(() => timer.primitive('big', new Array(2049).fill(k)), RangeError);
  assert.equal(timer.primitive('max', new Array(2048).fill(k)).kernels.length, 2048);
});

test('two devices of one model on one recorder stay two: "<name>" and "<name> #2", each with its own facts', async () => {
  const a = new FakeGPU(), b = new FakeGPU({ quantum: 65536n, passNs: 300_000n });
  const now = () => a.now();
  const recorder = new Recorder({ now });
  const ta = wrapDevice(a.device, { recorder, now }), tb = wrapDevice(b.device, { recorder, now: () => b.now() });
  submitPasses(a.device, 'k', 4);
  submitPasses(b.device, 'k', 3);
  await a.complete();
  await b.complete();
  await ta.flush();
  await tb.flush();
  const snap = JSON.parse(recorder.toJSON());
  const name = 'Fake GPU "test double"';
  assert.deepEqual(snap.entries.map((e) => [e.name, e.device, e.dispatch_count]), [['k', name, 4], ['k', `${name} #2`, 3]]);
  assert.ok(ta.quantumNs < 65536n);
  assert.deepEqual(snap.devices.map((d) => [d.name, d.resolution_ns]), [[name, Number(ta.quantumNs)], [`${name} #2`, 65536]]);
  assert.deepEqual(snap.queues.map((q) => q.device), [name, `${name} #2`]);
  await ta.close();
  const again = wrapDevice(a.device, { recorder, now }); // the same device wrapped again keeps its label
  assert.equal(again.name, name);
  const long = wrapDevice(new FakeGPU().device, { recorder, now, deviceName: 'D'.repeat(200) });
  const long2 = wrapDevice(new FakeGPU().device, { recorder, now, deviceName: 'D'.repeat(200) });
  assert.deepEqual([long.name, long2.name], ['D'.repeat(127), `${'D'.repeat(124)} #2`], 'labels fit 127 bytes');
});

test('the clock model: bound contains the truth for bracketed samples of a drifting clock', () => {
  const m = new ClockModel();
  const truth = (d) => d - 1_000_000_000n + (d - 1_000_000_000n) / 10000n; // host = device + 100 ppm
  for (let i = 0; i < 40; i++) {
    const d = 1_000_000_000n + BigInt(i) * 50_000_000n; // 2 s of samples
    const h = truth(d);
    m.add(d, h - BigInt(1000 + (i % 7) * 300), h + BigInt(500 + (i % 5) * 400));
  }
  for (const d of [1_000_000_000n, 1_975_000_000n, 2_950_000_000n]) {
    const p = m.map(d);
    const err = p.host > truth(d) ? p.host - truth(d) : truth(d) - p.host;
    assert.ok(err <= p.bound, `error ${err} > bound ${p.bound}`);
  }
  assert.ok(Math.abs(m.driftPpm + 100) < 20, `drift ${m.driftPpm}`);
  assert.equal(new ClockModel().map(5n), null);
});

test('the snapshot: schema v3, sorted entries, exact sums, u64 past 2^53 as strings, a valid Chrome trace', async () => {
  const { gpu, timer, device } = setup({ offset: (1n << 60n) });
  submitPasses(device, 'zeta', 3);
  submitPasses(device, 'Alpha', 2);
  submitPasses(device, 'alpha', 1);
  await gpu.complete();
  await timer.flush();
  const rec = timer.recorder;
  rec.now = () => (1n << 55n) + 1n;
  const text = timer.snapshotJSON();
  const s = JSON.parse(text);
  assert.equal(s.schema, 'ktiming.snapshot');
  assert.equal(s.version, 3);
  assert.equal(s.taken_ns, ((1n << 55n) + 1n).toString());
  assert.deepEqual(s.entries.map((e) => e.name), ['Alpha', 'alpha', 'zeta']);
  for (const e of s.entries) {
    assert.equal(e.backend, 'webgpu');
    assert.equal(e.device, 'Fake GPU "test double"');
    assert.equal(e.sum_ns, e.total_ns);
    assert.equal(e.sample_count, e.samples.length);
    assert.equal(e.hist.reduce((a, b) => a + b[1], 0), e.dispatch_count);
  }
  assert.equal(s.span_table.count, 6);
  assert.equal(s.span_table.entry.split(' ').length > 0, true);
  assert.equal(s.threads[0].os_tid, 42);
  const tr = JSON.parse(timer.chromeTraceJSON());
  assert.equal(tr.traceEvents.filter((e) => e.ph === 'X').length, 6);
});

test('the snapshot states its host clock: CLOCK_MONOTONIC from Node\'s own clock, unknown for a clock given', async () => {
  const { nodeRecorder } = await import('../src/node.js');
  const domain = (rec) => JSON.parse(rec.toJSON()).clock_domain;
  assert.equal(domain(nodeRecorder()), 'CLOCK_MONOTONIC');          // process.hrtime.bigint(): what merge maps
  assert.equal(domain(nodeRecorder({ now: () => 1n })), 'unknown');
  assert.equal(domain(new Recorder({ now: () => 5n })), 'unknown');
  const { timer } = setup();                                         // the fake GPU's clock
  assert.equal(JSON.parse(timer.snapshotJSON()).clock_domain, 'unknown');
  const plain = wrapDevice(new FakeGPU().device);                     // no clock given: the package's own
  assert.equal(JSON.parse(plain.snapshotJSON()).clock_domain, 'CLOCK_MONOTONIC');
  await timer.close();
  await plain.close();
});

test('a timer given its own clock on a recorder of another: the file says unknown, taken_ns on the timer\'s clock', async () => {
  const { nodeRecorder } = await import('../src/node.js');
  const gpu = new FakeGPU({ auto: true });
  const timer = wrapDevice(gpu.device, { recorder: nodeRecorder(), now: () => gpu.now() });
  submitPasses(gpu.device, 'k', 3);
  await timer.flush();
  const s = JSON.parse(timer.snapshotJSON());
  assert.equal(s.clock_domain, 'unknown', 'the spans are not on CLOCK_MONOTONIC');
  assert.equal(BigInt(s.taken_ns), gpu.host, 'taken_ns read from the clock of the spans');
  assert.ok(timer.recorder.spans.every((sp) => sp.done <= gpu.host));
  assert.equal(timer.deviceFacts().hostClock, 'unknown');
  const own = nodeRecorder();                // one clock for both: the recorder's name stands
  const same = wrapDevice(new FakeGPU().device, { recorder: own, now: own.now });
  assert.equal(JSON.parse(same.snapshotJSON()).clock_domain, 'CLOCK_MONOTONIC');
  await timer.close();
  await same.close();
});

test('names with a lone UTF-16 surrogate are written as U+FFFD: the snapshot stays valid UTF-8', () => {
  const rec = new Recorder({ host: 'h\udfff' });
  const dev = rec.deviceLabel('dev\udc00');
  rec.queue(dev, 'Q\ud800');
  rec.device(dev, () => ({ clockDomain: 'device', resolutionNs: 1n }));
  rec.record(rec.kernel('bad\ud800label', dev), { duration: 1000n, start: 5000n, flags: SPAN_DEVICE, queue: 0 });
  rec.record(rec.kernel('bad\udbfflabel', dev), { duration: 2000n, start: 6000n, flags: SPAN_DEVICE, queue: 0 });
  rec.record(rec.kernel('ok \ud83d\ude00', dev), { duration: 3000n, start: 7000n, flags: SPAN_DEVICE, queue: 0 });
  for (const text of [rec.toJSON(), rec.toChromeTrace()]) {
    assert.ok(!/\\ud[89ab][0-9a-f]{2}(?!\\ud[c-f])|(?<!\\ud[89ab][0-9a-f]{2})\\ud[c-f][0-9a-f]{2}/i.test(text), 'no lone surrogate escape');
  }
  const s = JSON.parse(rec.toJSON());
  assert.deepEqual(s.entries.map((e) => [e.name, e.device, e.dispatch_count]),
    [['bad\ufffdlabel', 'dev\ufffd', 2], ['ok \ud83d\ude00', 'dev\ufffd', 1]]);
  assert.equal(s.host, 'h\ufffd');
  assert.equal(s.queues[0].label, 'Q\ufffd');
  assert.equal(s.devices[0].name, 'dev\ufffd');
});
