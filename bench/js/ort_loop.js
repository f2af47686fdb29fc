// SPDX-License-Identifier: Apache-2.0
// ONNX Runtime's Node.js binding running one model RUNS times in a loop, as a user's serving
// loop would (await session.run(feeds), the outputs read): the loop's wall time, the median
// run, and the outputs written raw to OUT_DIR/<i>.bin. bench/python_vs_ort.py runs it beside
// the same loop in Python with hetgraph.
//   node ort_loop.js MODEL_DIR RUNS INTRA_THREADS [OUT_DIR]
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require(path.join(__dirname, '..', 'models', 'node_modules', 'onnxruntime-node'));
const {sequentialSession} = require('./harness');

const arrays = {
  float32: Float32Array,
  int64: BigInt64Array,
  int32: Int32Array
};

async function main() {
  const [dir, runs, intra, outDir] = process.argv.slice(2);
  const meta = JSON.parse(fs.readFileSync(path.join(dir, 'meta.json'), 'utf8'));
  const session = await sequentialSession(ort, path.join(dir, 'model.onnx'), intra);
  const feeds = {};
  for (const i of meta.inputs) {
    const b = fs.readFileSync(path.join(dir, `${i.name}.bin`));
    const A = arrays[i.dtype];
    feeds[i.name] = new ort.Tensor(
        i.dtype, new A(b.buffer, b.byteOffset, b.byteLength / A.BYTES_PER_ELEMENT), i.shape);
  }
  let out = await session.run(feeds);  // the first run pays for allocation: not timed
  const samples = new Float64Array(Number(runs));
  const start = process.hrtime.bigint();
  for (let k = 0; k < samples.length; ++k) {
    const s = process.hrtime.bigint();
    out = await session.run(feeds);
    samples[k] = Number(process.hrtime.bigint() - s) / 1e9;
  }
  const loop = Number(process.hrtime.bigint() - start) / 1e9;
  if (outDir) {
    fs.mkdirSync(outDir, {recursive: true});
    meta.outputs.forEach((o, i) => {
      const y = out[o.name].data;
      fs.writeFileSync(
          path.join(outDir, `${i}.bin`), Buffer.from(y.buffer, y.byteOffset, y.byteLength));
    });
  }
  samples.sort();
  console.log(JSON.stringify({
    runtime: 'onnxruntime-node',
    runs: samples.length,
    loop_s: loop,
    median_run_s: samples[samples.length >> 1],
    ort_version: ort.env.versions.node
  }));
}
main().catch((e) => {
  console.error(e);
  process.exit(1);
});
