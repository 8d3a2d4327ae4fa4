#!/usr/bin/env node
// webgpu_overhead.mjs — what ktiming-webgpu costs a program that submits many small compute passes: the same loop
// (one dispatch per pass, one pass per encoder and submit, a wait every 16 submits) on one Dawn device, untimed
// (the device's own methods) and timed (wrapped: timestamp queries, resolves, read-back, recording), alternating
// in the same run. The verdict is for small passes (saxpy over 256 Ki floats, about a millisecond on lavapipe);
// a line before it gives the same ratio for near-empty passes (1,024 invocations), where on lavapipe the
// timestamp writes themselves cost about as much as the pass. Prints passes per second and, last,
//   webgpu_overhead: timed_vs_untimed=<timed passes/s / untimed passes/s>   (1 = free; the goal is >= 0.9)
// as the median over pairs of rounds (one of each mode back to back) of the pair's ratio.
// Run by `make bench` through the build tree's bench/webgpu_overhead (webgpu_overhead.cmake). Without Node's
// `webgpu` package or an adapter it says so and prints timed_vs_untimed=skipped.
const PASSES = 96;       // passes per round
const ROUNDS = 15;       // pairs of rounds (one of each mode)
const N = 256 * 1024;    // saxpy elements of a small pass
const WAIT_EVERY = 16;   // submits between waits

let node;
try {
  node = await import('../bindings/webgpu/src/node.js');
} catch (e) {
  console.log(`webgpu_overhead: cannot load the package: ${e.message}`);
  console.log('webgpu_overhead: timed_vs_untimed=skipped');
  process.exit(0);
}
let ctx;
try {
  ctx = await node.createNodeDevice({ recorder: node.nodeRecorder({ maxSpans: 1 << 20 }) });
} catch (e) {
  console.log(`webgpu_overhead: no WebGPU here: ${e.message}`);
  console.log('webgpu_overhead: timed_vs_untimed=skipped');
  process.exit(0);
}
const { device, timer } = ctx;
const pipeline = device.createComputePipeline({ label: 'saxpy', layout: 'auto', compute: { entryPoint: 'main',
  module: device.createShaderModule({ code: `@group(0) @binding(0) var<storage, read_write> y: array<f32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@compute @workgroup_size(256) fn main(@builtin(global_invocation_id) g: vec3u) {
  if (g.x < arrayLength(&y)) { y[g.x] = 2.0 * x[g.x] + y[g.x]; }
}` }) } });
const y = device.createBuffer({ size: 4 * N, usage: GPUBufferUsage.STORAGE });
const x = device.createBuffer({ size: 4 * N, usage: GPUBufferUsage.STORAGE });
const bindGroup = device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [
  { binding: 0, resource: { buffer: y } }, { binding: 1, resource: { buffer: x } }] });
let groups = N / 256;

async function round(timed) {
  const create = timed ? () => device.createCommandEncoder() : () => timer.raw.createCommandEncoder();
  const submit = timed ? (cbs) => device.queue.submit(cbs) : (cbs) => timer.raw.submit(cbs);
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < PASSES; i++) {
    const enc = create();
    const pass = enc.beginComputePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, bindGroup);
    pass.dispatchWorkgroups(groups);
    pass.end();
    submit([enc.finish()]);
    if (i % WAIT_EVERY === WAIT_EVERY - 1) await device.queue.onSubmittedWorkDone();
  }
  await device.queue.onSubmittedWorkDone();
  if (timed) await timer.flush(); // the read-back is part of the timed cost
  return Number(process.hrtime.bigint() - t0) / 1e9;
}

const median = (v) => { const s = [...v].sort((a, b) => a - b); return s[s.length >> 1]; };
// Alternating rounds of both modes; passes per second of each (medians) and their ratio.
async function measure(rounds) {
  await round(false); // warm-up: pipeline, allocations, the ring's slots
  await round(true);
  const untimed = [], timed = [];
  for (let r = 0; r < rounds; r++) { // which mode goes first alternates, so neither gets the warmer start
    if (r % 2) timed.push(await round(true));
    untimed.push(await round(false));
    if (!(r % 2)) timed.push(await round(true));
  }
  // The verdict is the median over the pairs of rounds (one of each mode, run back to back) of the pair's
  // throughput ratio: the load of a shared machine drifts over seconds, and a pair sees nearly the same load.
  const ratio = median(untimed.map((u, i) => u / timed[i]));
  const mu = PASSES / median(untimed), mt = PASSES / median(timed);
  return { ratio, mu, mt, timedPasses: BigInt(PASSES * (rounds + 1)) };
}
console.log(`webgpu_overhead: device ${timer.name}`);
groups = 4; // near-empty passes: 1,024 invocations
const tiny = await measure(5);
console.log(`webgpu_overhead: near-empty passes: untimed ${tiny.mu.toFixed(0)}/s, timed ${tiny.mt.toFixed(0)}/s ` +
  `(medians), ratio ${tiny.ratio.toFixed(3)} (median of pairs; information)`);
groups = N / 256;
const small = await measure(ROUNDS);
console.log(`webgpu_overhead: small passes (saxpy, ${N} floats), ${PASSES} x ${ROUNDS} pairs of rounds: ` +
  `untimed ${small.mu.toFixed(0)}/s, timed ${small.mt.toFixed(0)}/s (medians)`);
const e = [...timer.recorder.entries.values()].find((v) => v.name === 'saxpy');
const expected = tiny.timedPasses + small.timedPasses;
console.log(`webgpu_overhead: timed passes recorded ${e ? e.count : 0n} of ${expected}, dropped ${e ? e.droppedTotal() : 0n}`);
await timer.close();
device.destroy();
if (!e || e.count + e.droppedTotal() !== expected) {
  console.log('webgpu_overhead: FAILED: passes were lost without being counted');
  process.exit(1);
}
console.log(`webgpu_overhead: timed_vs_untimed=${small.ratio.toFixed(3)}`);
