// SPDX-License-Identifier: Apache-2.0
// Greedy generation with ONNX Runtime's Node.js binding on the model folder of
// export_gpt2.py, as examples/python/generate_gpt2.py does it with hetgraph: one run per
// token, each run's present_* fed back as the next past_* (ONNX Runtime's own output tensors,
// not copied), the argmax of the logits on the host. One JSON line: tokens per second after
// the first token, the time to the first one, and whether the tokens are PyTorch's.
//   node ort_generate.js DIR INTRA_THREADS
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require(path.join(__dirname, '..', 'models', 'node_modules', 'onnxruntime-node'));
const {sequentialSession} = require('../js/harness');

async function main() {
  const [dir, intra] = process.argv.slice(2);
  const meta = JSON.parse(fs.readFileSync(path.join(dir, 'meta.json'), 'utf8'));
  const t0 = process.hrtime.bigint();
  const session = await sequentialSession(ort, path.join(dir, 'model.onnx'), intra);
  const setup = Number(process.hrtime.bigint() - t0) / 1e9;
  const size = meta.cache_shape.reduce((a, b) => a * b, 1);
  const cache = {};
  for (const name of Object.keys(meta.state)) {
    cache[name] = new ort.Tensor('float32', new Float32Array(size), meta.cache_shape);
  }
  const prompt = meta.prompt;
  const generated = [];
  let first = null;
  const start = process.hrtime.bigint();
  for (let t = 0; t < prompt.length + meta.new_tokens - 1; ++t) {
    const token = t < prompt.length ? prompt[t] : generated[generated.length - 1];
    const feeds = {
      ids: new ort.Tensor('int64', BigInt64Array.from([BigInt(token)]), [1, 1]),
      position: new ort.Tensor('int64', BigInt64Array.from([BigInt(t)]), [1]),
      ...cache,
    };
    const out = await session.run(feeds);
    for (const [past, present] of Object.entries(meta.state)) cache[past] = out[present];
    if (t >= prompt.length - 1) {
      const logits = out.logits.data;
      let best = 0;
      for (let i = 1; i < logits.length; ++i) {
        if (logits[i] > logits[best]) best = i;
      }
      generated.push(best);
      if (first === null) first = Number(process.hrtime.bigint() - start) / 1e9;
    }
  }
  const total = Number(process.hrtime.bigint() - start) / 1e9;
  const same = generated.length === meta.generated.length &&
      generated.every((x, i) => x === meta.generated[i]);
  console.log(JSON.stringify({
    runtime: 'onnxruntime-node',
    intra_threads: Number(intra),
    ort_version: ort.env.versions.node,
    setup_s: setup,
    prompt: prompt.length,
    new_tokens: generated.length,
    first_token_s: first,
    total_s: total,
    tokens_per_s: (generated.length - 1) / (total - first),
    same_as_pytorch: same
  }));
}
main().catch((e) => {
  console.error(e);
  process.exit(1);
});
