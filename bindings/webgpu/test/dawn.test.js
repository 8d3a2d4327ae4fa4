// dawn.test.js — the timer on a real WebGPU implementation: Dawn (npm `webgpu`) on lavapipe 25. Run through
// tests/webgpu/run-node-test.sh, which sets the driver environment and reports SKIPPED where Dawn or the driver is
// absent. Exact counts, spans inside their host brackets, quantised and unquantised stamps, a full ring, a device
// destroyed mid-run, a primitive with trials, and the CLI reading the snapshot.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import v8 from 'node:v8';
import vm from 'node:vm';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createNodeDevice, nodeRecorder, writeSnapshot, SPAN_DEVICE, SPAN_HOST_TIMED, SPAN_TRIALS } from '../src/node.js';

const WGSL = `@group(0) @binding(0) var<storage, read_write> a: array<f32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3u) {
  if (g.x < arrayLength(&a)) { a[g.x] = a[g.x] * 0.5 + 1.0; }
}`;

async function open(opts = {}) {
  const ctx = await createNodeDevice(opts);
  const { device } = ctx;
  const pipeline = device.createComputePipeline({ label: 'halve', layout: 'auto',
    compute: { module: device.createShaderModule({ code: WGSL }), entryPoint: 'main' } });
  const buffer = device.createBuffer({ size: 4 * 65536, usage: GPUBufferUsage.STORAGE });
  const bindGroup = device.createBindGroup({ layout: pipeline.getBindGroupLayout(0),
    entries: [{ binding: 0, resource: { buffer } }] });
  const dispatch = (pass) => { pass.setPipeline(pipeline); pass.setBindGroup(0, bindGroup); pass.dispatchWorkgroups(1024); };
  return { ...ctx, pipeline, dispatch };
}

// Encoders of `per` passes each, `n` passes in all; label null: named by the pipeline.
function passes(ctx, label, n, per = 1) {
  for (let i = 0; i < n; i += per) {
    const enc = ctx.device.createCommandEncoder();
    for (let k = 0; k < per && i + k < n; k++) {
      const p = enc.beginComputePass(label ? { label } : {});
      ctx.dispatch(p);
      p.end();
    }
    ctx.device.queue.submit([enc.finish()]);
  }
}

// A full garbage collection on demand (what --expose-gc gives), to check what happens to objects the program drops.
v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc');

const entry = (timer, name) => [...timer.recorder.entries.values()].find((e) => e.name === name);

// Fails instead of hanging when p does not settle within a generous time (a hang is the defect checked).
function within(p, ms, what) {
  let t;
  return Promise.race([p, new Promise((_, rej) => { t = setTimeout(() => rej(new Error(`${what}: still pending after ${ms} ms`)), ms); })])
    .finally(() => clearTimeout(t));
}

test('unquantised: exact dispatch counts, every span inside its host bracket, ns stamps', async () => {
  const ctx = await open();
  const { timer, device } = ctx;
  passes(ctx, 'labelled', 12, 3);
  passes(ctx, null, 5);
  await device.queue.onSubmittedWorkDone();
  passes(ctx, 'labelled', 4, 4);
  await timer.flush();
  assert.equal(entry(timer, 'labelled').count, 16n);
  assert.equal(entry(timer, 'halve').count, 5n);
  assert.equal(entry(timer, 'labelled').droppedTotal() + entry(timer, 'halve').droppedTotal(), 0n);
  assert.equal(timer.recorder.spans.length, 21);
  for (const s of timer.recorder.spans) {
    assert.equal(s.flags, SPAN_DEVICE);
    assert.ok(s.duration > 0n);
    assert.ok(s.submit <= s.start && s.end <= s.done, `span [${s.start}, ${s.end}] outside [${s.submit}, ${s.done}]`);
    assert.ok(s.enqueue <= s.submit);
  }
  assert.ok(timer.quantumNs < 1024n, `quantum ${timer.quantumNs} with quantisation off`);
  await timer.close();
  device.destroy();
});

test('quantised (Dawn\'s default): the 65,536 ns quantum is detected and in every span\'s uncertainty', async () => {
  const ctx = await open({ quantize: true });
  const { timer, device } = ctx;
  passes(ctx, 'q', 10, 2);
  await timer.flush();
  assert.equal(entry(timer, 'q').count, 10n);
  assert.equal(timer.quantumNs, 65536n);
  for (const s of timer.recorder.spans) {
    assert.equal(s.duration % 65536n, 0n);
    assert.ok(s.uncertainty >= 65536n);
    assert.ok(s.start + s.uncertainty >= s.submit && s.end <= s.done + s.uncertainty);
  }
  const snap = JSON.parse(timer.snapshotJSON());
  assert.equal(snap.devices[0].resolution_ns, 65536);
  await timer.close();
  device.destroy();
});

test('a full ring is counted as dropped, and the slots come back after the read-back', async () => {
  const ctx = await open({ timer: { ringSize: 2, passesPerSlot: 2 } });
  const { timer, device } = ctx;
  passes(ctx, 'r', 6, 6); // one encoder, six passes, room for four
  await timer.flush();
  const e = entry(timer, 'r');
  assert.equal(e.count, 4n);
  assert.equal(e.dropped[1], 2n); // ring_full
  passes(ctx, 'r', 4, 4);
  await timer.flush();
  assert.equal(e.count, 8n);
  assert.equal(e.droppedTotal(), 2n);
  await timer.close();
  device.destroy();
});

test('a device destroyed mid-run: nothing hangs and every pass is recorded or counted', async () => {
  const ctx = await open();
  const { timer, device } = ctx;
  passes(ctx, 'lost', 24, 2);
  device.destroy();
  await within(timer.flush(), 60000, 'flush after destroy');
  const e = entry(timer, 'lost');
  assert.equal(e.count + e.droppedTotal(), 24n);
  await within(timer.close(), 60000, 'close after destroy');
});

test('a device destroyed as the program\'s own read-back lands: every pass recorded or counted', async () => {
  const ctx = await open();
  const { timer, device } = ctx;
  const out = device.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const buffer = device.createBuffer({ size: 16, usage: GPUBufferUsage.COPY_SRC });
  for (let i = 0; i < 6; i++) {
    const enc = device.createCommandEncoder();
    const p = enc.beginComputePass({ label: 'race' });
    ctx.dispatch(p);
    p.end();
    if (i === 5) enc.copyBufferToBuffer(buffer, 0, out, 0, 16);
    device.queue.submit([enc.finish()]);
  }
  await device.queue.onSubmittedWorkDone();
  for (let i = 0; i < 20; i++) await Promise.resolve(); // the timer has asked for its maps by now
  await out.mapAsync(GPUMapMode.READ);                   // granted in the same tick as the timer's
  device.destroy();                                      // the program is done: before the timer reads its maps
  await within(timer.flush(), 60000, 'flush after destroy');
  const e = entry(timer, 'race');
  assert.ok(e, 'the passes have an entry');
  assert.equal(e.count + e.dropped[5], 6n, 'recorded or counted device_lost');
  assert.equal(e.droppedTotal(), e.dropped[5]);
  await within(timer.close(), 60000, 'close after destroy');
});

test('a submit Dawn rejects (validation): counted invalid_times, not recorded from the slot\'s earlier stamps', async () => {
  const ctx = await open({ timer: { ringSize: 1 } });
  const { timer, device } = ctx;
  const errors = [];
  device.onuncapturederror = (ev) => errors.push(ev.error.message);
  passes(ctx, 'good', 1);
  await timer.flush();
  const victim = device.createBuffer({ size: 256, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
  const src = device.createBuffer({ size: 256, usage: GPUBufferUsage.COPY_SRC });
  const enc = device.createCommandEncoder();
  const p = enc.beginComputePass({ label: 'never_ran' });
  ctx.dispatch(p);
  p.end();
  enc.copyBufferToBuffer(src, 0, victim, 0, 256);
  const cb = enc.finish();
  victim.destroy(); // the submit is rejected: nothing of it runs
  device.queue.submit([cb]);
  await timer.flush();
  await device.queue.onSubmittedWorkDone();
  assert.equal(errors.length, 1, 'the program still sees its own validation error');
  const e = entry(timer, 'never_ran');
  assert.equal(e.count, 0n);
  assert.equal(e.dropped[10], 1n); // invalid_times
  assert.equal(timer.model.count, 1, 'nothing fed to the clock model');
  passes(ctx, 'good', 1);
  await timer.flush();
  assert.equal(entry(timer, 'good').count, 2n);
  await timer.close();
  device.destroy();
});

test('close() with a command buffer not yet submitted: the program\'s later submit still runs', async () => {
  const ctx = await open();
  const { timer, device } = ctx;
  const errors = [];
  device.onuncapturederror = (ev) => errors.push(ev.error.message);
  const enc = device.createCommandEncoder();
  const p = enc.beginComputePass({ label: 'pending' });
  ctx.dispatch(p);
  p.end();
  const cb = enc.finish();
  const later = device.createCommandEncoder(); // made before close(), used after it
  await timer.close();
  device.queue.submit([cb]);
  const p2 = later.beginComputePass({ label: 'after_close' });
  ctx.dispatch(p2);
  p2.end();
  device.queue.submit([later.finish()]);
  await device.queue.onSubmittedWorkDone();
  assert.deepEqual(errors, [], 'no submit of the program is rejected');
  assert.equal(entry(timer, 'pending').dropped[4], 1n);     // never_submitted when close() ran
  assert.equal(entry(timer, 'after_close').dropped[8], 1n); // no_timing
  device.destroy();
});

// Encoders of one pass each that the program drops without submitting (half of them finished).
function abandon(ctx, label, n) {
  for (let i = 0; i < n; i++) {
    const enc = ctx.device.createCommandEncoder();
    const p = enc.beginComputePass({ label });
    ctx.dispatch(p);
    p.end();
    if (i % 2) enc.finish();
  }
}

test('abandoned encoders: in a snapshot as never_submitted, and their ring slots back once collected', async () => {
  const ctx = await open({ timer: { ringSize: 4 } });
  const { timer, device } = ctx;
  abandon(ctx, 'abandoned', 4); // the whole ring
  await timer.flush();
  const snap = JSON.parse(timer.snapshotJSON());
  assert.deepEqual(snap.entries.find((e) => e.name === 'abandoned').dropped_by, { never_submitted: 4 });
  for (let i = 0; i < 200 && entry(timer, 'abandoned')?.dropped[4] !== 4n; i++) {
    gc();
    await new Promise((r) => setImmediate(r));
  }
  assert.equal(entry(timer, 'abandoned')?.dropped[4], 4n, 'counted never_submitted when collected');
  passes(ctx, 'work', 4);
  await timer.flush();
  assert.equal(entry(timer, 'work').count, 4n, 'the ring has its slots back (no ring_full)');
  await timer.close();
  assert.equal(entry(timer, 'abandoned').droppedTotal(), 4n, 'counted once');
  device.destroy();
});

test('a primitive on Dawn: per-kernel GPU time / trials, the unit inside the drained CPU time', async () => {
  const ctx = await open();
  const { timer, device } = ctx;
  const prim = timer.primitive('two', [{ name: 'first', record: (p) => ctx.dispatch(p) },
    { name: 'second', record: (p) => ctx.dispatch(p) }]);
  const r = await prim.execute({ trials: 5, warmup: 1 });
  assert.equal(r.trials, 5);
  for (let i = 0; i < 2; i++) {
    assert.ok(r.gpuTotalNs[i] > 0n);
    assert.equal(r.gpuNs[i], r.gpuTotalNs[i] / 5n);
  }
  assert.ok(r.unitTotalNs >= r.gpuTotalNs[0] + r.gpuTotalNs[1]);
  assert.ok(r.cpuTotalNs >= r.unitTotalNs, 'the GPU work lies inside the CPU bracket');
  assert.equal(entry(timer, 'two/first').count, 1n);
  assert.equal(entry(timer, 'two').count, 1n);
  const flags = Object.fromEntries(timer.recorder.spans.map((s) => [s.entry.name, s.flags]));
  assert.equal(flags['two/second'], SPAN_DEVICE | SPAN_TRIALS);
  assert.equal(flags.two, SPAN_HOST_TIMED | SPAN_TRIALS);
  prim.destroy();
  await timer.close();
  device.destroy();
});

test('the CLI reads what the package wrote on Dawn (report, compare, merge)', { skip: !process.env.KT_CLI && 'KT_CLI not set' }, async () => {
  const dir = mkdtempSync(`${tmpdir()}/ktiming-webgpu-`);
  const files = [];
  for (const k of ['a', 'b']) {
    const ctx = await open({ recorder: nodeRecorder() });
    passes(ctx, 'cli_kernel', 12, 4);
    await ctx.timer.close();
    writeSnapshot(ctx.timer, `${dir}/${k}.json`);
    ctx.device.destroy();
    files.push(`${dir}/${k}.json`);
  }
  const cli = (...args) => execFileSync(process.env.KT_CLI, args, { encoding: 'utf8' });
  const rep = cli('report', files[0]);
  assert.match(rep, /cli_kernel\s+WebGPU\s+12\b/);
  assert.match(cli('compare', files[0], files[1]), /cli_kernel/);
  // both files come from this one test process: merge refuses that unless told (it would double-count a process)
  cli('merge', files[0], files[1], '--allow-same-process', '-o', `${dir}/m.json`);
  const merged = JSON.parse(cli('report', `${dir}/m.json`, '--format', 'json'));
  assert.equal(merged.entries.find((e) => e.name === 'cli_kernel').dispatch_count, 24);
  writeFileSync(`${dir}/done`, '');
});

test('ktiming demo shows the three WGSL kernels as WebGPU rows', { skip: !process.env.KT_CLI && 'KT_CLI not set' }, () => {
  const dir = mkdtempSync(`${tmpdir()}/ktiming-webgpu-demo-`);
  const out = execFileSync(process.env.KT_CLI, ['demo', '--backend', 'webgpu', '--dispatches', '10', '--warmup', '1',
    '--size', '1', '-o', `${dir}/demo.json`], { encoding: 'utf8' });
  for (const k of ['box_blur', 'saxpy', 'reduce']) assert.match(out, new RegExp(`${k}\\s+WebGPU\\s+10\\b`));
  const snap = JSON.parse(execFileSync(process.env.KT_CLI, ['report', `${dir}/demo.json`, '--format', 'json'], { encoding: 'utf8' }));
  assert.equal(snap.entries.filter((e) => e.backend === 'webgpu').length, 3);
  assert.equal(snap.span_table.count, 30);
});
