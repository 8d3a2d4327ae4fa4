// align_node.mjs — the Node side of test_webgpu_align: one host-timed span read with the package's own host clock
// (process.hrtime.bigint(), CLOCK_MONOTONIC), written as a snapshot by the package's writer.
//   node align_node.mjs PACKAGE_DIR OUT.json
import { pathToFileURL } from 'node:url';

const [pkg, out] = process.argv.slice(2);
const { nodeRecorder, writeSnapshot, hostClock, SPAN_HOST_TIMED } = await import(pathToFileURL(`${pkg}/src/node.js`).href);
const now = hostClock();
const rec = nodeRecorder();
const start = now();
let x = 0;
for (let i = 0; i < 100000; i++) x += i % 7; // something to time
const end = now();
rec.record(rec.kernel('node_span', 'host'), { duration: end - start, start, end, flags: SPAN_HOST_TIMED });
writeSnapshot(rec, out);
process.exit(x > 0 ? 0 : 1);
