// clock.js — the host clock, and the model that places WebGPU timestamps (no defined epoch) on it.
//
// Every submit the timer brackets: host time before queue.submit (h0) and after onSubmittedWorkDone resolves (h1).
// The device stamps of that submit, first begin t0 and last end t1, happened inside it, so the device read t0
// happened at a host time in [h0, h1 - (t1 - t0)]: a bracketed sample {device t0, host interval}, as
// src/calibrate fits them in C (docs/calibration.md). The model is the weighted least-squares line through the
// interval midpoints (weights 1/halfwidth^2) over the latest samples, and its bound at device time x is
//   sum_i |c_i(x)| * halfwidth_i  +  max(0, max_i |residual_i| - halfwidth_i)  +  1 ns
// where pred(x) = sum_i c_i(x) * mid_i: the worst that read positions inside their brackets can do to the line,
// plus what the brackets cannot explain (quantisation, jitter). The timer adds the timestamp quantum on top.
// Plain JavaScript: no imports, runs in a browser and in Node.

/**
 * The host clock as BigInt ns: process.hrtime.bigint() in Node (CLOCK_MONOTONIC), performance.now() elsewhere
 * (its resolution is the browser's: 5 us to 100 us).
 * @returns {() => bigint}
 */
export function hostClock() {
  const p = globalThis.process;
  if (p && p.hrtime && typeof p.hrtime.bigint === 'function') return () => p.hrtime.bigint();
  const perf = globalThis.performance;
  return () => BigInt(Math.round(perf.now() * 1e6));
}

/** Name of the host clock hostClock() reads, for documentation in outputs. */
export function hostClockName() {
  const p = globalThis.process;
  return p && p.hrtime && typeof p.hrtime.bigint === 'function' ? 'CLOCK_MONOTONIC' : 'performance.now';
}

export class ClockModel {
  /** @param {{window?: number}} [opts] window: how many latest samples the fit uses (default 64) */
  constructor(opts = {}) {
    this.window = opts.window ?? 64;
    this.samples = []; // {device: bigint, lo: bigint, hi: bigint}
    this.fit = null;
    this.count = 0;    // samples ever added
  }

  /**
   * Adds a bracketed sample: the device read `device` happened at a host time in [lo, hi].
   * Ignored when hi < lo (a bracket that cannot hold the read).
   */
  add(device, lo, hi) {
    if (hi < lo) return false;
    this.samples.push({ device, lo, hi });
    if (this.samples.length > this.window) this.samples.shift();
    this.count++;
    this.fit = null;
    return true;
  }

  get size() { return this.samples.length; }

  _fit() {
    if (this.fit) return this.fit;
    const s = this.samples;
    if (!s.length) return null;
    // Centred on the first sample, in integer ns before going to doubles (absolute values may be ~1e18).
    const dref = s[0].device, href = s[0].lo;
    const xs = [], zs = [], hw = [], ws = [];
    for (const q of s) {
      const x = Number(q.device - dref);
      const mid = Number(q.lo - href) + Number(q.hi - q.lo) / 2;
      xs.push(x);
      zs.push(mid - x);                       // host - device, relative
      const h = Math.max(Number(q.hi - q.lo) / 2, 0.5);
      hw.push(h);
      ws.push(1 / (h * h));
    }
    let W = 0, xb = 0, zb = 0;
    for (let i = 0; i < s.length; i++) { W += ws[i]; xb += ws[i] * xs[i]; zb += ws[i] * zs[i]; }
    xb /= W; zb /= W;
    let sxx = 0, sxz = 0;
    for (let i = 0; i < s.length; i++) { sxx += ws[i] * (xs[i] - xb) ** 2; sxz += ws[i] * (xs[i] - xb) * (zs[i] - zb); }
    // A drift only when the samples span enough device time to say something (100 ms) and it is one a clock can
    // have (under 5,000 ppm, KT_CLOCK_DRIFT_LIMIT_PPM in C); else offset only, and the residuals carry the rest.
    const span = Math.max(...xs) - Math.min(...xs);
    let slope = sxx > 0 && span >= 1e8 ? sxz / sxx : 0;
    if (Math.abs(slope) > 5e-3) slope = 0;
    let unexplained = 0;
    for (let i = 0; i < s.length; i++) {
      const r = Math.abs(zs[i] - (zb + slope * (xs[i] - xb)));
      unexplained = Math.max(unexplained, r - hw[i]);
    }
    this.fit = { dref, href, xs, hw, ws, W, xb, zb, sxx, slope, useSlope: slope !== 0, unexplained };
    return this.fit;
  }

  /** Fitted drift of the device clock against the host's, in ppm; positive: the device runs fast (as in C). */
  get driftPpm() { const f = this._fit(); return f && f.slope ? -f.slope * 1e6 : 0; }

  /**
   * Places a device time on the host timeline.
   * @param {bigint} device
   * @returns {{host: bigint, bound: bigint} | null} null before the first sample
   */
  map(device) {
    const f = this._fit();
    if (!f) return null;
    const x = Number(device - f.dref);
    const z = f.zb + f.slope * (x - f.xb);
    // Coefficients of each midpoint in the prediction: w_i/W + (x - xb) w_i (x_i - xb)/Sxx.
    let bracket = 0;
    for (let i = 0; i < f.xs.length; i++) {
      let c = f.ws[i] / f.W;
      if (f.useSlope) c += ((x - f.xb) * f.ws[i] * (f.xs[i] - f.xb)) / f.sxx;
      bracket += Math.abs(c) * f.hw[i];
    }
    const bound = Math.ceil(bracket + Math.max(0, f.unexplained) + 1);
    return { host: f.href + (device - f.dref) + BigInt(Math.round(z)), bound: BigInt(bound) };
  }
}
