#!/usr/bin/env node
// demo.mjs — the `ktiming demo` kernels (3x3 box blur, saxpy, reduction) in WGSL on a Dawn device, each warmed up
// and then timed per pass by ktiming-webgpu, results checked on the host; writes the snapshot JSON.
//   node demo.mjs -o snapshot.json [--dispatches N] [--warmup N] [--size MB] [--quantize] [--trace trace.json]
// Exit status: 0 done, 1 a kernel or a check failed, 2 usage error, 3 no WebGPU here (no `webgpu` package, no
// adapter or no timestamp-query): `ktiming demo` then skips the WebGPU rows.
import { createNodeDevice, nodeRecorder, writeSnapshot, writeChromeTrace } from '../src/node.js';

const WIDTH = 1024;

const BLUR = /* wgsl */ `
struct P { w: u32, h: u32 }
@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
@group(0) @binding(2) var<uniform> p: P;
@compute @workgroup_size(16, 16) fn main(@builtin(global_invocation_id) g: vec3u) {
  if (g.x >= p.w || g.y >= p.h) { return; }
  var sum = 0.0;
  for (var dy = -1; dy <= 1; dy++) {
    let yy = u32(clamp(i32(g.y) + dy, 0, i32(p.h) - 1));
    for (var dx = -1; dx <= 1; dx++) {
      let xx = u32(clamp(i32(g.x) + dx, 0, i32(p.w) - 1));
      sum += src[yy * p.w + xx];
    }
  }
  dst[g.y * p.w + g.x] = sum / 9.0;
}`;

const SAXPY = /* wgsl */ `
struct P { n: u32, a: f32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: P;
@compute @workgroup_size(256) fn main(@builtin(global_invocation_id) g: vec3u) {
  if (g.x < p.n) { y[g.x] = p.a * x[g.x] + y[g.x]; }
}`;

const REDUCE = /* wgsl */ `
const PER_THREAD = 32u;
struct P { n: u32 }
@group(0) @binding(0) var<storage, read> v: array<f32>;
@group(0) @binding(1) var<storage, read_write> partial: array<f32>;
@group(0) @binding(2) var<uniform> p: P;
var<workgroup> s: array<f32, 256>;
@compute @workgroup_size(256) fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wg: vec3u) {
  let l = lid.x;
  let base = wg.x * 256u * PER_THREAD + l;
  var acc = 0.0;
  for (var k = 0u; k < PER_THREAD; k++) {
    let i = base + k * 256u;
    if (i < p.n) { acc += v[i]; }
  }
  s[l] = acc;
  workgroupBarrier();
  for (var stride = 128u; stride > 0u; stride >>= 1u) {
    if (l < stride) { s[l] += s[l + stride]; }
    workgroupBarrier();
  }
  if (l == 0u) { partial[wg.x] = s[0]; }
}`;

function usage(msg) {
  if (msg) process.stderr.write(`demo.mjs: ${msg}\n`);
  process.stderr.write('usage: node demo.mjs -o snapshot.json [--dispatches N] [--warmup N] [--size MB] [--quantize] [--trace FILE]\n');
  process.exit(2);
}

function parseArgs(argv) {
  const a = { out: null, trace: null, dispatches: 20, warmup: 3, size: 8, quantize: false };
  const int = (v, lo, hi, what) => {
    const n = Number(v);
    if (!/^\d+$/.test(String(v)) || n < lo || n > hi) usage(`${what} wants a whole number from ${lo} to ${hi}, not '${v}'`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i], v = () => (i + 1 < argv.length ? argv[++i] : usage(`${k} needs a value`));
    if (k === '-o' || k === '--output') a.out = v();
    else if (k === '--trace') a.trace = v();
    else if (k === '-n' || k === '--dispatches') a.dispatches = int(v(), 1, 1000000, k);
    else if (k === '-w' || k === '--warmup') a.warmup = int(v(), 0, 1000000, k);
    else if (k === '-s' || k === '--size') a.size = int(v(), 1, 4096, k);
    else if (k === '--quantize') a.quantize = true;
    else if (k === '-h' || k === '--help') usage();
    else usage(`unknown argument '${k}'`);
  }
  if (!a.out) usage('-o FILE is required');
  return a;
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  let ctx;
  try {
    // A span for every timed dispatch: `ktiming demo` records them from the snapshot.
    ctx = await createNodeDevice({ quantize: a.quantize, recorder: nodeRecorder({ maxSpans: 3 * a.dispatches + 64 }) });
  } catch (e) {
    process.stderr.write(`demo.mjs: WebGPU unavailable: ${e.message}\n`);
    process.exit(3);
  }
  const { device, timer } = ctx;
  const errors = [];
  device.addEventListener?.('uncapturederror', (ev) => errors.push(ev.error.message));
  const height = Math.max(1, Math.floor((a.size << 20) / 2 / 4 / WIDTH));
  const n = WIDTH * height;
  const S = GPUBufferUsage.STORAGE, CD = GPUBufferUsage.COPY_DST, CS = GPUBufferUsage.COPY_SRC;
  const init = new Float32Array(n);
  for (let i = 0; i < n; i++) init[i] = (i % 7) * 0.5;
  const bufA = device.createBuffer({ size: n * 4, usage: S | CD | CS });
  const bufB = device.createBuffer({ size: n * 4, usage: S | CD | CS });
  device.queue.writeBuffer(bufA, 0, init);
  const groupsR = Math.ceil(n / (256 * 32));
  const bufC = device.createBuffer({ size: groupsR * 4, usage: S | CS });
  const uni = (words) => {
    const b = device.createBuffer({ size: 16, usage: GPUBufferUsage.UNIFORM | CD });
    device.queue.writeBuffer(b, 0, words);
    return b;
  };
  const kernel = (label, code, src, dst, params) => {
    const pipeline = device.createComputePipeline({ label, layout: 'auto',
      compute: { module: device.createShaderModule({ code, label }), entryPoint: 'main' } });
    const bindGroup = device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [
      { binding: 0, resource: { buffer: src } }, { binding: 1, resource: { buffer: dst } },
      { binding: 2, resource: { buffer: params } }] });
    return { pipeline, bindGroup };
  };
  const blur = kernel('box_blur', BLUR, bufA, bufB, uni(new Uint32Array([WIDTH, height, 0, 0])));
  const saxpyParams = new ArrayBuffer(16);
  new Uint32Array(saxpyParams, 0, 1)[0] = n;
  new Float32Array(saxpyParams, 4, 1)[0] = 2.0;
  const saxpy = kernel('saxpy', SAXPY, bufA, bufB, uni(new Uint8Array(saxpyParams)));
  const reduce = kernel('reduce', REDUCE, bufA, bufC, uni(new Uint32Array([n, 0, 0, 0])));

  // One submit per dispatch, as a program would; warm-up passes go through an untimed encoder.
  const run = async (k, gx, gy, count, timed) => {
    for (let i = 0; i < count; i++) {
      const enc = timed ? device.createCommandEncoder() : timer.raw.createCommandEncoder();
      const pass = enc.beginComputePass(); // unlabelled: named by the pipeline label
      pass.setPipeline(k.pipeline);
      pass.setBindGroup(0, k.bindGroup);
      pass.dispatchWorkgroups(gx, gy);
      pass.end();
      device.queue.submit([enc.finish()]);
      if (i % 8 === 7) await device.queue.onSubmittedWorkDone();
    }
    await device.queue.onSubmittedWorkDone();
  };
  const readBack = async (buf, count) => {
    const m = device.createBuffer({ size: count * 4, usage: GPUBufferUsage.MAP_READ | CD });
    const enc = timer.raw.createCommandEncoder();
    enc.copyBufferToBuffer(buf, 0, m, 0, count * 4);
    timer.raw.submit([enc.finish()]);
    await m.mapAsync(GPUMapMode.READ);
    const v = new Float32Array(m.getMappedRange().slice(0));
    m.unmap();
    m.destroy();
    return v;
  };

  await run(blur, WIDTH / 16, Math.ceil(height / 16), a.warmup, false);
  await run(blur, WIDTH / 16, Math.ceil(height / 16), a.dispatches, true);
  let out = await readBack(bufB, Math.min(n, 4 * WIDTH));
  const x = WIDTH + 5; // an interior pixel: the mean of its 3x3 neighbourhood
  let want = 0;
  for (let dy = -1; dy <= 1; dy++) for (let dx = -1; dx <= 1; dx++) want += init[x + dy * WIDTH + dx];
  if (height > 2 && Math.abs(out[x] - want / 9) > 1e-4) errors.push(`box_blur: pixel ${x} is ${out[x]}, want ${want / 9}`);

  device.queue.writeBuffer(bufB, 0, new Float32Array(n)); // y = 0, then y = 2x per dispatch
  await run(saxpy, Math.ceil(n / 256), 1, a.warmup, false);
  await run(saxpy, Math.ceil(n / 256), 1, a.dispatches, true);
  out = await readBack(bufB, 64);
  const times = a.warmup + a.dispatches;
  for (let i = 0; i < 64; i++) {
    if (Math.abs(out[i] - 2 * times * init[i]) > 1e-3 * (1 + 2 * times * init[i])) {
      errors.push(`saxpy: y[${i}] is ${out[i]}, want ${2 * times * init[i]}`);
      break;
    }
  }

  await run(reduce, groupsR, 1, a.warmup, false);
  await run(reduce, groupsR, 1, a.dispatches, true);
  out = await readBack(bufC, groupsR);
  let got = 0, exp = 0;
  for (let i = 0; i < groupsR; i++) got += out[i];
  for (let i = 0; i < n; i++) exp += init[i];
  if (Math.abs(got - exp) > 1e-3 * exp) errors.push(`reduce: sum is ${got}, want ${exp}`);

  await timer.close();
  writeSnapshot(timer, a.out);
  if (a.trace) writeChromeTrace(timer, a.trace);
  device.destroy();
  if (errors.length) {
    for (const e of errors) process.stderr.write(`demo.mjs: ${e}\n`);
    process.exit(1);
  }
}

main().catch((e) => {
  process.stderr.write(`demo.mjs: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
