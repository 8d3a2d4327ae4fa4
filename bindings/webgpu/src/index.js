// index.js — ktiming-webgpu: times WebGPU compute passes and writes ktiming snapshots. Browser-safe entry (no
// Node imports); Node programs may also import 'ktiming-webgpu/node' for files, host name and Dawn set-up.
export { WebGPUTimer, wrapDevice, adapterName } from './timer.js';
export { Primitive } from './primitive.js';
export {
  Recorder, snapshotJSON, chromeTraceJSON, histIndex, histLower, histValue, DROP_REASONS,
  SPAN_DEVICE, SPAN_HOST_TIMED, SPAN_ERROR, SPAN_TRIALS, SCHEMA_NAME, SCHEMA_VERSION, VERSION,
} from './recorder.js';
export { ClockModel, hostClock, hostClockName } from './clock.js';
