// SPDX-License-Identifier: Apache-2.0
// What the Node.js peer harnesses (bench/cnn/run.js, bench/models/run.js) share: timing a child
// process under the build lock, reading ONNX TensorProto and raw outputs, comparing them.
'use strict';
const {execFileSync} = require('child_process');
const fs = require('fs');
const path = require('path');

// Runs argv under flock (no build beside it) and /usr/bin/time -v; returns the child's last
// stdout line parsed as JSON, with its peak RSS in MiB. A child that fails throws, with its
// stderr already shown.
function measure(argv, scratch, env = {}) {
  const timeFile = path.join(scratch, 'time.txt');
  const stdout = execFileSync(
      'flock', ['/tmp/hetgraph-build.lock', '/usr/bin/time', '-v', '-o', timeFile, ...argv],
      {maxBuffer: 1 << 26, stdio: ['ignore', 'pipe', 'inherit'], env: {...process.env, ...env}});
  const lines = stdout.toString().trim().split('\n');
  const r = JSON.parse(lines[lines.length - 1]);
  const m = /Maximum resident set size \(kbytes\): (\d+)/.exec(fs.readFileSync(timeFile, 'utf8'));
  r.peak_rss_mib = m ? Number(m[1]) / 1024 : null;
  return r;
}

// ONNX TensorProto -> Float32Array (the fields hetgraph-run writes: dims 1, raw_data 9,
// float_data 4).
function readTensorProto(file) {
  const b = fs.readFileSync(file);
  let at = 0;
  const varint = () => {
    let v = 0n, s = 0n;
    for (;;) {
      const c = b[at++];
      v |= BigInt(c & 0x7f) << s;
      if (!(c & 0x80)) return v;
      s += 7n;
    }
  };
  let floats = null;
  while (at < b.length) {
    const key = Number(varint());
    const field = key >> 3, wire = key & 7;
    if (wire === 0) {
      varint();
    } else if (wire === 5) {
      at += 4;
    } else if (wire === 1) {
      at += 8;
    } else if (wire === 2) {
      const len = Number(varint());
      if (field === 9 || field === 4) {
        const bytes = Buffer.from(b.subarray(at, at + len));
        floats = new Float32Array(bytes.buffer, bytes.byteOffset, len / 4);
      }
      at += len;
    } else {
      throw new Error(`${file}: wire type ${wire}`);
    }
  }
  if (!floats) throw new Error(`${file}: no float data`);
  return floats;
}

function readRaw(file) {
  const b = fs.readFileSync(file);
  return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
}

// max |a - ref| / max |ref|: Infinity where the sizes differ.
function relErr(a, ref) {
  if (a.length !== ref.length) return Infinity;
  let maxDiff = 0, maxRef = 0;
  for (let i = 0; i < a.length; ++i) {
    maxDiff = Math.max(maxDiff, Math.abs(a[i] - ref[i]));
    maxRef = Math.max(maxRef, Math.abs(ref[i]));
  }
  if (Number.isNaN(maxDiff)) return Infinity;
  return maxRef > 0 ? maxDiff / maxRef : maxDiff;
}

const median = (v) => {
  const s = [...v].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
};

const geomean = (v) => Math.exp(v.reduce((a, x) => a + Math.log(x), 0) / v.length);

// The arguments' `--name value` pairs, with defaults.
function options(args) {
  return (name, def) => {
    const i = args.indexOf('--' + name);
    return i >= 0 ? args[i + 1] : def;
  };
}

// ONNX Runtime's CPU session for a serving loop: every graph optimisation, nodes one at a time,
// `intra` threads inside each (bench/js/ort_loop.js, bench/generation/ort_generate.js).
function sequentialSession(ort, model, intra) {
  return ort.InferenceSession.create(model, {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
    intraOpNumThreads: Number(intra),
    interOpNumThreads: 1,
  });
}

module.exports = {
  measure,
  readTensorProto,
  readRaw,
  relErr,
  median,
  geomean,
  options,
  sequentialSession
};
