// SPDX-License-Identifier: Apache-2.0
// One ONNX Runtime timing run in its own process (so its peak RSS is its own): loads the
// model, feeds the raw float input, times `repeat` runs after `warmup`, writes the output's
// floats raw and prints one JSON line.
//   node ort_child.js MODEL.onnx INPUT.bin N,C,H,W sequential|parallel INTRA_THREADS REPEAT WARMUP OUT.bin
'use strict';
const fs = require('fs');
const ort = require('onnxruntime-node');

async function main() {
  const [model, input, shapeArg, mode, intraArg, repeatArg, warmupArg, outPath] =
      process.argv.slice(2);
  const shape = shapeArg.split(',').map(Number);
  const intra = Number(intraArg), repeat = Number(repeatArg), warmup = Number(warmupArg);
  const buf = fs.readFileSync(input);
  const data = new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4);
  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(model, {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    executionMode: mode,
    intraOpNumThreads: intra,
    // Parallel mode runs independent nodes on an inter-op pool: as many threads as cores.
    interOpNumThreads: mode === 'parallel' ? 2 : 1,
  });
  const setup = Number(process.hrtime.bigint() - t0) / 1e9;
  const feeds = {[session.inputNames[0]]: new ort.Tensor('float32', data, shape)};
  let out;
  for (let i = 0; i < warmup; ++i) out = await session.run(feeds);
  const samples = [];
  for (let i = 0; i < repeat; ++i) {
    const s = process.hrtime.bigint();
    out = await session.run(feeds);
    samples.push(Number(process.hrtime.bigint() - s) / 1e9);
  }
  const y = out[session.outputNames[0]].data;
  fs.writeFileSync(outPath, Buffer.from(y.buffer, y.byteOffset, y.byteLength));
  samples.sort((a, b) => a - b);
  const n = samples.length;
  const median = n % 2 ? samples[(n - 1) / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
  console.log(JSON.stringify({median_s: median, min_s: samples[0], max_s: samples[n - 1],
                              setup_s: setup, ort_version: ort.env.versions.node}));
}
main().catch((e) => {
  console.error(e);
  process.exit(1);
});
