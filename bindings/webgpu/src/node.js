// node.js — the Node entry point of ktiming-webgpu: everything of the browser entry, plus writing the snapshot
// and the Chrome trace to files, the host name and pid in the snapshot, and a Dawn device from the `webgpu` npm
// package (optional: only createNodeDevice() needs it).
import { writeFileSync, renameSync } from 'node:fs';
import { hostname } from 'node:os';
import { Recorder } from './recorder.js';
import { hostClock, hostClockName } from './clock.js';
import { wrapDevice } from './timer.js';

export * from './index.js';

/** A Recorder that names this machine and process, and the host clock (CLOCK_MONOTONIC), in its snapshot. */
export function nodeRecorder(opts = {}) {
  const clockDomain = opts.now ? 'unknown' : hostClockName(); // another clock given: not ours to name
  return new Recorder({ host: hostname(), pid: process.pid, now: hostClock(), clockDomain, ...opts });
}

// Writes atomically (a temporary file renamed over the path), so a reader never sees half a snapshot.
function writeAtomic(path, text) {
  if (path === '-' || path === '/dev/stdout') {
    process.stdout.write(text);
    return;
  }
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, text);
  renameSync(tmp, path);
}

/** Writes the snapshot JSON of a timer or recorder to `path`. */
export function writeSnapshot(timerOrRecorder, path) {
  const rec = timerOrRecorder.recorder ?? timerOrRecorder;
  writeAtomic(path, rec.toJSON());
}

/** Writes the Chrome trace JSON of a timer or recorder to `path`. */
export function writeChromeTrace(timerOrRecorder, path) {
  const rec = timerOrRecorder.recorder ?? timerOrRecorder;
  writeAtomic(path, rec.toChromeTrace());
}

/**
 * A timed Dawn device in Node: imports the `webgpu` npm package (it must be installed), creates the GPU with
 * `disable-dawn-features=timestamp_quantization` unless quantize is true, requests an adapter and a device with
 * 'timestamp-query' and wraps it. Sets XDG_RUNTIME_DIR to a private folder when unset (Dawn wants one).
 * @returns {Promise<{gpu, adapter, device, timer}>}
 */
export async function createNodeDevice(opts = {}) {
  if (!process.env.XDG_RUNTIME_DIR) {
    const { mkdtempSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    process.env.XDG_RUNTIME_DIR = mkdtempSync(`${tmpdir()}/ktiming-xdg-`);
  }
  const { create, globals } = await import('webgpu');
  Object.assign(globalThis, globals);
  const gpu = create(opts.quantize ? [] : ['disable-dawn-features=timestamp_quantization']);
  const adapter = await gpu.requestAdapter(opts.adapterOptions);
  if (!adapter) throw new Error('createNodeDevice: no WebGPU adapter (on Linux Dawn needs a Vulkan driver it accepts)');
  if (!adapter.features.has('timestamp-query')) throw new Error('createNodeDevice: the adapter has no timestamp-query');
  const device = await adapter.requestDevice({ requiredFeatures: ['timestamp-query'], ...(opts.deviceDescriptor || {}) });
  const recorder = opts.recorder ?? nodeRecorder(opts.timer?.now ? { now: opts.timer.now } : {}); // one clock for both
  const timer = wrapDevice(device, { recorder, adapterInfo: adapter.info, ...(opts.timer || {}) });
  // dawn.node tears the device down (and crashes the process) when its GPU object is garbage-collected while the
  // device is in use: the timer, which the device's patched methods reference, keeps both alive.
  timer.keepAlive = { gpu, adapter };
  return { gpu, adapter, device, timer };
}
