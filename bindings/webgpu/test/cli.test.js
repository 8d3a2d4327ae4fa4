// cli.test.js — the built `ktiming` CLI (KT_CLI) on snapshots and traces the package wrote (from the test-double
// GPU, so it runs wherever Node does): report (text, json, html), compare, merge, all unchanged C code.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { FakeGPU, submitPasses } from './fake-gpu.js';
import { wrapDevice, nodeRecorder, writeSnapshot, writeChromeTrace } from '../src/node.js';

const CLI = process.env.KT_CLI;
const dir = mkdtempSync(`${tmpdir()}/ktiming-webgpu-cli-`);

async function write(name, passNs, quantum = 1n) {
  const gpu = new FakeGPU({ passNs, quantum, hostStep: 3n });
  const now = () => gpu.now();
  const timer = wrapDevice(gpu.device, { recorder: nodeRecorder({ now }), now });
  for (let i = 0; i < 4; i++) {
    submitPasses(gpu.device, 'stencil', 10, 5);
    submitPasses(gpu.device, 'scan "x"\n', 5);
    await gpu.complete();
  }
  const prim = timer.primitive('sort', [{ name: 'histogram', record: (p) => p.dispatchWorkgroups(1) },
    { name: 'scatter', record: (p) => p.dispatchWorkgroups(1) }]);
  gpu.auto = true;
  await prim.execute({ trials: 3 });
  await timer.close();
  const path = `${dir}/${name}.json`;
  writeSnapshot(timer, path);
  writeChromeTrace(timer, `${dir}/${name}.trace.json`);
  return path;
}

const cli = (...args) => execFileSync(CLI, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

test('ktiming report, compare and merge read the package\'s snapshots', { skip: !CLI && 'KT_CLI not set' }, async () => {
  const a = await write('before', 100_000n), b = await write('after', 200_000n, 65536n);
  const text = cli('report', a);
  assert.match(text, /stencil\s+WebGPU\s+40\b/);
  assert.match(text, /sort\/histogram\s+WebGPU\s+1\b/);
  assert.match(text, /on Fake GPU/);
  const back = JSON.parse(cli('report', a, '--format', 'json'));
  const st = back.entries.find((e) => e.name === 'stencil');
  assert.equal(st.backend, 'webgpu');
  assert.equal(st.dispatch_count, 40);
  assert.equal(st.total_ns, 40 * 100000);
  assert.equal(back.span_table.count, 63); // 60 passes, 2 kernels and the primitive
  const cmp = cli('compare', a, b);
  assert.match(cmp, /stencil.*SLOWER/);
  const m = `${dir}/merged.json`;
  // both files come from this one test process: merge refuses that unless told (it would double-count a process)
  cli('merge', a, b, '--allow-same-process', '-o', m);
  const merged = JSON.parse(cli('report', m, '--format', 'json'));
  assert.equal(merged.entries.find((e) => e.name === 'stencil').dispatch_count, 80);
  cli('report', a, '--format', 'html', '-o', `${dir}/r.html`);
  assert.match(readFileSync(`${dir}/r.html`, 'utf8'), /stencil/);
  const trace = JSON.parse(readFileSync(`${dir}/before.trace.json`, 'utf8'));
  assert.equal(trace.traceEvents.filter((e) => e.ph === "X").length, 63);
});

test('a snapshot the package wrote and the C reader refuses is a failure, not a pass', { skip: !CLI && 'KT_CLI not set' }, async () => {
  const a = await write('again', 5000n);
  const bad = readFileSync(a, 'utf8').replace('"backend": "webgpu"', '"backend": "webgpux"');
  const r = spawnSync(CLI, ['report', '-'], { input: bad, encoding: 'utf8' });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /unknown backend/);
});

test('host times past 2^53 ns survive the C reader exactly', { skip: !CLI && 'KT_CLI not set' }, async () => {
  const start = (1n << 62n) + 12345n;
  const gpu = new FakeGPU({ hostStart: start, offset: -(1n << 61n), passNs: 777n });
  const now = () => gpu.now();
  const timer = wrapDevice(gpu.device, { recorder: nodeRecorder({ now }), now });
  submitPasses(gpu.device, 'far', 3);
  await gpu.complete();
  await timer.close();
  const path = `${dir}/far.json`;
  writeSnapshot(timer, path);
  const mine = timer.recorder.spans.map((s) => [s.start, s.end, s.submit]);
  const back = JSON.parse(cli('report', path, '--format', 'json'));
  const t = back.span_table;
  assert.equal(t.count, 3);
  // Rebuild absolute times from the columns (docs/json-schema.md: start deltas, end and submit as offsets).
  const tok = (col) => t[col].split(' ').flatMap((x) => { const [v, n] = x.split('*'); return Array(Number(n || 1)).fill(v); });
  let prev = 0n;
  const starts = tok('start_ns').map((d) => (prev = BigInt.asUintN(64, prev + BigInt(d))));
  const durs = tok('duration_ns').map(BigInt), ends = tok('end_ns').map(BigInt), subs = tok('submit_ns');
  starts.forEach((s0, i) => {
    assert.ok(s0 > (1n << 53n));
    assert.deepEqual([s0, BigInt.asUintN(64, s0 + durs[i] + ends[i]), BigInt.asUintN(64, s0 + BigInt(subs[i]))], mine[i]);
  });
  assert.equal(back.entries[0].sum_ns, 3 * 777);
});

test('two devices of one model on one recorder load as two devices in the C reader', { skip: !CLI && 'KT_CLI not set' }, async () => {
  const a = new FakeGPU({ hostStep: 3n }), b = new FakeGPU({ hostStep: 3n, quantum: 65536n, passNs: 300_000n });
  const recorder = nodeRecorder({ now: () => a.now() });
  const timers = [wrapDevice(a.device, { recorder, now: () => a.now() }), wrapDevice(b.device, { recorder, now: () => b.now() })];
  submitPasses(a.device, 'k', 4);
  submitPasses(b.device, 'k', 3);
  await a.complete();
  await b.complete();
  for (const t of timers) await t.close();
  const path = `${dir}/two.json`;
  writeSnapshot(recorder, path);
  const back = JSON.parse(cli('report', path, '--format', 'json'));
  const dev = 'Fake GPU "test double"';
  const byName = (x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0);
  assert.deepEqual(back.entries.map((e) => [e.device, e.dispatch_count]).sort(byName), [[dev, 4], [`${dev} #2`, 3]]);
  assert.deepEqual(back.devices.map((d) => [d.name, d.resolution_ns]).sort(byName),
    [[dev, Number(timers[0].quantumNs)], [`${dev} #2`, 65536]]);
});

test('a label with a lone UTF-16 surrogate: the C reader loads the snapshot', { skip: !CLI && 'KT_CLI not set' }, async () => {
  const gpu = new FakeGPU({ hostStep: 3n });
  const now = () => gpu.now();
  const timer = wrapDevice(gpu.device, { recorder: nodeRecorder({ now }), now, deviceName: 'dev\udc00' });
  submitPasses(gpu.device, 'bad\ud800label', 2);
  await gpu.complete();
  await timer.close();
  const path = `${dir}/surrogate.json`;
  writeSnapshot(timer, path);
  const back = JSON.parse(cli('report', path, '--format', 'json'));
  assert.deepEqual(back.entries.map((e) => [e.name, e.device, e.dispatch_count]), [['bad\ufffdlabel', 'dev\ufffd', 2]]);
});
