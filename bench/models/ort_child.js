// SPDX-License-Identifier: Apache-2.0
// One ONNX Runtime timing run in its own process (its peak RSS its own) on one exported model
// folder (export_models.py): loads model.onnx, feeds the inputs' raw files, runs `warmup`
// times, then times runs until `budget` seconds or `max` runs have passed (3 at least), writes
// each output's floats raw to OUT_DIR/<i>.bin and prints one JSON line.
//   node ort_child.js MODEL_DIR sequential|parallel INTRA_THREADS WARMUP BUDGET_S MAX OUT_DIR
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

const arrays = {float32: Float32Array, int64: BigInt64Array, int32: Int32Array};

async function main() {
  const [dir, mode, intra, warmup, budget, max, outDir] = process.argv.slice(2);
  const meta = JSON.parse(fs.readFileSync(path.join(dir, 'meta.json'), 'utf8'));
  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(path.join(dir, 'model.onnx'), {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    executionMode: mode,
    intraOpNumThreads: Number(intra),
    interOpNumThreads: mode === 'parallel' ? 2 : 1,
  });
  const setup = Number(process.hrtime.bigint() - t0) / 1e9;
  const feeds = {};
  for (const i of meta.inputs) {
    const b = fs.readFileSync(path.join(dir, `${i.name}.bin`));
    const A = arrays[i.dtype];
    feeds[i.name] = new ort.Tensor(i.dtype, new A(b.buffer, b.byteOffset, b.byteLength / A.BYTES_PER_ELEMENT), i.shape);
  }
  let out;
  for (let i = 0; i < Number(warmup); ++i) out = await session.run(feeds);
  const samples = [];
  const start = process.hrtime.bigint();
  while (samples.length < 3 ||
         (samples.length < Number(max) && Number(process.hrtime.bigint() - start) / 1e9 < Number(budget))) {
    const s = process.hrtime.bigint();
    out = await session.run(feeds);
    samples.push(Number(process.hrtime.bigint() - s) / 1e9);
  }
  fs.mkdirSync(outDir, {recursive: true});
  meta.outputs.forEach((o, i) => {
    const y = out[o.name].data;
    fs.writeFileSync(path.join(outDir, `${i}.bin`), Buffer.from(y.buffer, y.byteOffset, y.byteLength));
  });
  samples.sort((a, b) => a - b);
  const n = samples.length;
  const median = n % 2 ? samples[(n - 1) / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
  console.log(JSON.stringify({median_s: median, min_s: samples[0], max_s: samples[n - 1], runs: n,
                              setup_s: setup, ort_version: ort.env.versions.node}));
}
main().catch((e) => {
  console.error(e);
  process.exit(1);
});
