// SPDX-License-Identifier: Apache-2.0
// Issue 18's harness: ONNX Runtime, PyTorch and hetgraph on the same CNN files, interleaved.
//
//   node bench/cnn/run.js [--rounds 3] [--models googlenet,resnet18] [--batches 1,32]
//                         [--hetgraph [NAME=]build/tools/hetgraph-run[,NAME=PATH...]]
//                         [--dir build/bench-cnn]
//                         [--label NAME] [--engines sequential,shared-queue,critical-path,auto]
//                         [--contenders ort,pytorch,hetgraph]
//
// bench/cnn/run.sh exports the models first and installs onnxruntime-node; see bench/README.md.
// Every measurement is a fresh child process under /usr/bin/time -v (its peak RSS) and under
// flock /tmp/hetgraph-build.lock (no build runs beside it). Each round runs every
// configuration of every model and batch once, in the same order, so slow minutes of this
// noisy VM hit every contender alike. One JSON line per measurement goes to
// bench/results/<date>-cnn[-label].jsonl, then one summary line per model and batch: medians
// over the rounds, ONNX Runtime's and PyTorch's best configuration, hetgraph's ratio to ONNX
// Runtime's best, and hetgraph's outputs against ONNX Runtime's (max |a - b| / max |b|).
'use strict';
const {execFileSync} = require('child_process');
const fs = require('fs');
const path = require('path');
const harness = require('../js/harness');
const {readTensorProto, readRaw, relErr, median} = harness;

const root = path.resolve(__dirname, '..', '..');
const args = process.argv.slice(2);
const opt = harness.options(args);
const rounds = Number(opt('rounds', '3'));
const models = opt('models', 'googlenet,resnet18').split(',');
const batches = opt('batches', '1,32').split(',').map(Number);
// Several builds of hetgraph-run (NAME=PATH, a copy's libhetgraph.so beside it) run
// interleaved too: an A/B of a change inside the comparison with ONNX Runtime.
const variants = opt('hetgraph', 'build/tools/hetgraph-run').split(',').map((v) => {
  const eq = v.indexOf('=');
  return eq < 0 ? {name: '', bin: path.resolve(root, v)}
                : {name: v.slice(0, eq), bin: path.resolve(root, v.slice(eq + 1))};
});
const dir = path.resolve(root, opt('dir', 'build/bench-cnn'));
const label = opt('label', '');
const engines = opt('engines', 'sequential,shared-queue,critical-path,auto').split(',');
const extra = opt('hetgraph-args', '').split(' ').filter((s) => s.length);
// ONNX Runtime always runs: hetgraph's outputs are checked against it.
const contenders = new Set(['ort', ...opt('contenders', 'ort,pytorch,hetgraph').split(',')]);

// Repetitions: enough samples for a median, few enough that a round of everything stays near
// two minutes on 2 cores.
const reps = (b) => (b === 1 ? {repeat: 20, warmup: 3} : {repeat: 4, warmup: 1});

const out = path.join(dir, 'outputs');
fs.mkdirSync(out, {recursive: true});
const date = new Date().toISOString().slice(0, 10);
const resultsFile =
    path.join(root, 'bench', 'results', `${date}-cnn${label ? '-' + label : ''}.jsonl`);
const commit = execFileSync('git', ['-C', root, 'rev-parse', '--short', 'HEAD']).toString().trim();

// A copied hetgraph-run finds the libhetgraph.so beside it before its build's RUNPATH.
const measure = (argv) => harness.measure(argv, out, {LD_LIBRARY_PATH: path.dirname(argv[0])});

function configs(model, batch) {
  const onnx = path.join(dir, `${model}-b${batch}.onnx`);
  const {repeat, warmup} = reps(batch);
  const list = [];
  for (const mode of ['sequential', 'parallel']) {
    for (const intra of [1, 2]) {
      const o = path.join(out, `ort-${model}-b${batch}-${mode}-${intra}.bin`);
      list.push({
        who: 'ort', config: `${mode} intra ${intra}`, output: o,
        argv: ['node', path.join(__dirname, 'ort_child.js'), onnx,
               path.join(dir, `input-b${batch}.bin`), `${batch},3,224,224`, mode, String(intra),
               String(repeat), String(warmup), o],
      });
    }
  }
  for (const t of [1, 2]) {
    list.push({
      who: 'pytorch', config: `threads ${t}`,
      argv: ['/usr/bin/python3', path.join(__dirname, 'torch_child.py'), dir, model,
             String(batch), String(t), String(repeat), String(warmup)],
    });
  }
  for (const v of variants) for (const e of engines) {
    const o = path.join(out, `hg-${v.name}-${model}-b${batch}-${e}`);
    list.push({
      who: 'hetgraph', config: v.name ? `${v.name}/${e}` : e, output: path.join(o, 'y.pb'),
      argv: [v.bin, onnx, '--input', path.join(dir, `input-b${batch}.pb`), '--engine', e,
             '--repeat', String(repeat), '--warmup', String(warmup), '--json', '--output-dir', o,
             ...extra],
    });
  }
  return list.filter((c) => contenders.has(c.who));
}

const write = (o) => fs.appendFileSync(resultsFile, JSON.stringify(o) + '\n');

const all = {};  // "model b" -> "who config" -> [lines]
for (let r = 0; r < rounds; ++r) {
  for (const model of models) {
    for (const batch of batches) {
      for (const c of configs(model, batch)) {
        const res = measure(c.argv);
        const line = {kind: 'cnn-run', commit, round: r, model, batch, who: c.who,
                      config: c.config, median_s: res.median_s, min_s: res.min_s,
                      max_s: res.max_s, peak_rss_mib: res.peak_rss_mib};
        if (c.who === 'hetgraph') {
          line.executors = res.executors;
          line.planned_bytes = res.planned_bytes;
          line.nodes = res.nodes;
          line.tuning_runs = res.tuning_runs;
          line.code_path = res.code_path;
        }
        if (c.who === 'ort') line.version = res.ort_version;
        if (c.who === 'pytorch') line.version = res.torch_version;
        if (c.who === 'hetgraph') {
          // ONNX Runtime's sequential two-thread output is the reference.
          const ref = path.join(out, `ort-${model}-b${batch}-sequential-2.bin`);
          line.rel_err_vs_ort = relErr(readTensorProto(c.output), readRaw(ref));
        }
        write(line);
        console.error(`round ${r} ${model} b${batch} ${c.who} ${c.config}: ` +
                      `${(line.median_s * 1e3).toFixed(2)} ms, ${line.peak_rss_mib.toFixed(0)} MiB` +
                      (line.rel_err_vs_ort !== undefined ? `, err ${line.rel_err_vs_ort.toExponential(2)}` : ''));
        const key = `${model} ${batch}`;
        ((all[key] ??= {})[`${c.who}|${c.config}`] ??= []).push(line);
      }
    }
  }
}

// Summary: medians over rounds; the best configuration of each contender.
for (const [key, byConfig] of Object.entries(all)) {
  const [model, batch] = key.split(' ');
  const rows = Object.entries(byConfig).map(([k, lines]) => {
    const [who, config] = k.split('|');
    return {who, config, median_s: median(lines.map((l) => l.median_s)),
            peak_rss_mib: median(lines.map((l) => l.peak_rss_mib)),
            rel_err_vs_ort: lines[0].rel_err_vs_ort === undefined ? undefined :
                Math.max(...lines.map((l) => l.rel_err_vs_ort)),
            rounds: lines.length};
  });
  const best = (who) => rows.filter((x) => x.who === who).reduce((a, b) => (a.median_s <= b.median_s ? a : b));
  const ort = best('ort'), hg = best('hetgraph');
  const torch = contenders.has('pytorch') ? best('pytorch') : {median_s: NaN, config: 'not run'};
  const perVariant = {};
  for (const v of variants) {
    const mine = rows.filter((x) => x.who === 'hetgraph' && (v.name === '' || x.config.startsWith(v.name + '/')));
    const b = mine.reduce((a, c) => (a.median_s <= c.median_s ? a : c));
    perVariant[v.name || 'hetgraph'] = {best: b.config, median_s: b.median_s, ratio_vs_ort: b.median_s / ort.median_s,
                                        peak_rss_mib: b.peak_rss_mib, rss_ratio_vs_ort: b.peak_rss_mib / ort.peak_rss_mib};
  }
  const summary = {
    kind: 'cnn-summary', commit, model, batch: Number(batch), rounds,
    ort_best: ort, pytorch_best: torch, hetgraph_best: hg,
    hetgraph: Object.fromEntries(rows.filter((x) => x.who === 'hetgraph').map((x) => [x.config, x])),
    ratio_best_vs_ort: hg.median_s / ort.median_s,
    rss_ratio_vs_ort: hg.peak_rss_mib / ort.peak_rss_mib,
    variants: perVariant,
  };
  write(summary);
  console.log(`${model} b${batch}: ORT best ${(ort.median_s * 1e3).toFixed(2)} ms (${ort.config}, ` +
              `${ort.peak_rss_mib.toFixed(0)} MiB), PyTorch best ${(torch.median_s * 1e3).toFixed(2)} ms (${torch.config}), ` +
              `hetgraph best ${(hg.median_s * 1e3).toFixed(2)} ms (${hg.config}, ${hg.peak_rss_mib.toFixed(0)} MiB, ` +
              `err ${hg.rel_err_vs_ort.toExponential(2)}) = ${summary.ratio_best_vs_ort.toFixed(2)}x ORT`);
  for (const [name, v] of Object.entries(perVariant)) {
    console.log(`  ${name}: ${(v.median_s * 1e3).toFixed(2)} ms (${v.best}) = ${v.ratio_vs_ort.toFixed(2)}x ORT, ` +
                `RSS ${v.peak_rss_mib.toFixed(0)} MiB = ${v.rss_ratio_vs_ort.toFixed(2)}x ORT`);
  }
}
console.log(`results: ${path.relative(root, resultsFile)}`);
