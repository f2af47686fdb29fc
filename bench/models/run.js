// SPDX-License-Identifier: Apache-2.0
// Issue 48's model bench: ONNX Runtime, PyTorch and hetgraph on every model export_models.py
// wrote, at batch 1 and at each model's serving batch, interleaved.
//
//   node bench/models/run.js [--rounds 3] [--models a,b,...] [--batches 1,serving]
//                            [--hetgraph [NAME=]build/tools/hetgraph-run[,NAME=PATH...]]
//                            [--hetgraph-args "..."] [--dir build/bench-models] [--label NAME]
//                            [--contenders ort,pytorch,hetgraph] [--budget 1.5] [--profile]
//   node bench/models/run.js --summarize RESULTS.jsonl   # summaries of a run cut short
//
// bench/models/run.sh installs what it needs and exports the models first; see bench/README.md,
// "Models nobody tuned". Every measurement is a fresh child process under /usr/bin/time -v and
// the build lock. Each round runs every model and batch once with every contender, ONNX
// Runtime first: its median sets the repetitions of the others (a budget of about --budget
// seconds, 3 to 20 runs). hetgraph runs with its defaults (the automatic engine) and a tuning
// cache of its own that starts empty for each invocation of this script: the first round pays
// for the search (its runs are not timed; tuning_runs says how many), later rounds find the
// choice, as a user's next process would. Every contender's outputs are compared with
// PyTorch's (the exporter's, written by export_models.py): max |a - b| / max |b| over all
// outputs. A model that fails in a contender is recorded with its error, not fatal.
// --profile: hetgraph-run --profile, each hetgraph line carrying its time by op kind and its
// slowest nodes (bench/models/profile_summary.py sums them over the bench). Recording costs a
// little per node: profile in a pass of its own (--contenders hetgraph --rounds 1), not in
// the timed comparison.
// One JSON line per measurement to bench/results/<date>-models[-label].jsonl, then one summary
// line per model and batch and one for the whole bench (geometric means of the ratios to
// ONNX Runtime's best configuration over the models every contender ran correctly).
'use strict';
const {execFileSync} = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const harness = require('../js/harness');
const {readTensorProto, readRaw, relErr, median, geomean} = harness;

const root = path.resolve(__dirname, '..', '..');
const opt = harness.options(process.argv.slice(2));
// --summarize FILE: no runs; the summary and total lines of FILE's measurements (a run stopped
// before its last round writes none), appended to FILE where it does not hold them already.
const summarizeFile = opt('summarize', '');
const kept = summarizeFile ? fs.readFileSync(summarizeFile, 'utf8').split('\n').filter((l) => l.trim())
                                 .map((l) => JSON.parse(l)).filter((l) => l.kind === 'model-run')
                           : [];
let rounds = Number(opt('rounds', '3'));
const dir = path.resolve(root, opt('dir', 'build/bench-models'));
const manifest = JSON.parse(fs.readFileSync(path.join(dir, 'manifest.json'), 'utf8'));
const wanted = opt('models', '');
const batchKinds = opt('batches', '1,serving').split(',');
const entries = manifest.filter((m) => (!wanted || wanted.split(',').includes(m.model)) &&
                                       batchKinds.includes(m.batch === 1 ? '1' : 'serving'));
const variants = summarizeFile
    ? [...new Set(kept.filter((l) => l.who === 'hetgraph').map((l) => l.config))].map((name) => ({name}))
    : opt('hetgraph', 'build/tools/hetgraph-run').split(',').map((v) => {
      const eq = v.indexOf('=');
      return eq < 0 ? {name: 'hetgraph', bin: path.resolve(root, v)}
                    : {name: v.slice(0, eq), bin: path.resolve(root, v.slice(eq + 1))};
    });
const extra = opt('hetgraph-args', '').split(' ').filter((s) => s.length);
const contenders = new Set(opt('contenders', 'ort,pytorch,hetgraph').split(','));
const budget = Number(opt('budget', '1.5'));
const label = opt('label', '');
const profile = process.argv.includes('--profile');
const threads = os.cpus().length;
const tolerance = 1e-3;  // max |a - b| / max |b| above this: a wrong answer

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'hetgraph-models-'));
const cacheHome = path.join(scratch, 'cache');  // hetgraph's tuning cache: empty at the start
const date = new Date().toISOString().slice(0, 10);
const resultsFile = summarizeFile ? path.resolve(summarizeFile)
    : path.join(root, 'bench', 'results', `${date}-models${label ? '-' + label : ''}.jsonl`);
const commit = summarizeFile && kept.length ? kept[0].commit
    : execFileSync('git', ['-C', root, 'rev-parse', '--short', 'HEAD']).toString().trim();
const cpu = summarizeFile && kept.length ? kept[0].cpu : os.cpus()[0].model;
// A line FILE already holds (--summarize of a finished run) is not written twice.
const present = new Set(
    summarizeFile ? fs.readFileSync(summarizeFile, 'utf8').split('\n').filter((l) => l.trim()) : []);
const write = (o) => {
  const line = JSON.stringify(o);
  if (present.has(line)) return;
  present.add(line);
  fs.appendFileSync(resultsFile, line + '\n');
};

const reps = (seconds) => Math.max(3, Math.min(20, Math.round(budget / Math.max(seconds, 1e-6))));

// The contenders' configurations for one model folder; `ortMedian` (null before ONNX Runtime
// ran this round) sizes the repetitions.
function configs(e, ortMedian) {
  const list = [];
  const out = (who, config) => path.join(scratch, 'out', `${e.model}-b${e.batch}`, `${who}-${config}`);
  const heavy = ortMedian !== null && ortMedian > 0.5;
  const warmup = heavy ? 1 : 2;
  if (contenders.has('ort')) {
    for (const intra of [1, threads]) {
      const o = out('ort', `intra${intra}`);
      list.push({who: 'ort', config: `intra ${intra}`, outputs: (i) => path.join(o, `${i}.bin`),
                 read: readRaw,
                 argv: ['node', path.join(__dirname, 'ort_child.js'), e.dir, 'sequential',
                        String(intra), String(warmup), String(budget), '20', o]});
    }
  }
  if (contenders.has('pytorch')) {
    list.push({who: 'pytorch', config: `threads ${threads}`,
               argv: ['/usr/bin/python3', path.join(__dirname, 'torch_child.py'), e.dir,
                      String(threads), String(warmup), String(budget), '20']});
  }
  if (contenders.has('hetgraph')) {
    const n = reps(ortMedian ?? budget / 3);
    for (const v of variants) {
      const o = out('hg', v.name);
      const inputs = e.inputs.flatMap((i) => ['--input', `${i.name}=${path.join(e.dir, i.name + '.pb')}`]);
      list.push({who: 'hetgraph', config: v.name, outputs: (i) => path.join(o, `${e.outputs[i].name}.pb`),
                 read: readTensorProto, env: {XDG_CACHE_HOME: path.join(cacheHome, v.name),
                                              LD_LIBRARY_PATH: path.dirname(v.bin)},
                 argv: [v.bin, path.join(e.dir, 'model.onnx'), ...inputs, '--repeat', String(n),
                        '--warmup', String(warmup), '--json', '--output-dir', o,
                        ...(profile ? ['--profile'] : []), ...extra]});
    }
  }
  return list;
}

// The largest relative error over the outputs against PyTorch's.
function check(e, c) {
  if (!c.outputs) return 0;  // PyTorch: the reference itself
  let worst = 0;
  e.outputs.forEach((_, i) => {
    worst = Math.max(worst, relErr(c.read(c.outputs(i)), readRaw(path.join(e.dir, `expected${i}.bin`))));
  });
  return worst;
}

function runOne(e, c, round) {
  const line = {kind: 'model-run', commit, cpu, round, model: e.model, family: e.family,
                batch: e.batch, who: c.who, config: c.config};
  try {
    const res = harness.measure(c.argv, scratch, c.env);
    Object.assign(line, {median_s: res.median_s, min_s: res.min_s, max_s: res.max_s,
                         runs: res.runs ?? res.repeat, peak_rss_mib: res.peak_rss_mib});
    if (c.who === 'hetgraph') {
      Object.assign(line, {executors: res.executors, engine: res.engine, nodes: res.nodes,
                           tuning_runs: res.tuning_runs, code_path: res.code_path,
                           conv_layout: res.conv_layout, layout_seconds: res.layout_seconds});
      if (res.profile) {
        const per = (t) => t / res.profile.runs;
        line.profile = {runs: res.profile.runs, node_s_per_run: per(res.profile.node_s),
                        ops: res.profile.ops.map((o) => ({op: o.op, nodes: o.nodes, s_per_run: per(o.total_s), share: o.share})),
                        top: res.profile.nodes.slice(0, 8).map((n) => ({
                          name: n.name, op: n.op, kernel: n.kernel, input_shapes: n.input_shapes,
                          shape: n.shape, mean_s: n.mean_s, share: n.share}))};
      }
    }
    line.version = res.ort_version ?? res.torch_version;
    line.rel_err = check(e, c);
    line.correct = line.rel_err <= tolerance;
  } catch (err) {
    line.error = String(err.stderr ?? err.message).split('\n').filter((s) => s).slice(-3).join(' | ');
    line.correct = false;
  }
  write(line);
  console.error(`round ${round} ${e.model} b${e.batch} ${c.who} ${c.config}: ` +
                (line.error ? `FAILED ${line.error}`
                            : `${(line.median_s * 1e3).toFixed(2)} ms, err ${line.rel_err.toExponential(1)}`));
  return line;
}

const all = {};  // "model b" -> "who|config" -> [lines]
if (summarizeFile) {
  for (const l of kept) ((all[`${l.model} ${l.batch}`] ??= {})[`${l.who}|${l.config}`] ??= []).push(l);
  rounds = new Set(kept.map((l) => l.round)).size;
  if (!kept.some((l) => l.who === 'pytorch')) contenders.delete('pytorch');
}
for (let r = 0; r < (summarizeFile ? 0 : rounds); ++r) {
  for (const e of entries) {
    let ortMedian = null;
    const key = `${e.model} ${e.batch}`;
    for (const c of configs(e, null).filter((c) => c.who === 'ort')) {
      const l = runOne(e, c, r);
      ((all[key] ??= {})[`${c.who}|${c.config}`] ??= []).push(l);
      if (!l.error) ortMedian = Math.min(ortMedian ?? Infinity, l.median_s);
    }
    for (const c of configs(e, ortMedian).filter((c) => c.who !== 'ort')) {
      ((all[key] ??= {})[`${c.who}|${c.config}`] ??= []).push(runOne(e, c, r));
    }
  }
}

// Summary: per model and batch, each contender's best configuration by its median over the
// rounds; a configuration that failed or was wrong in any round counts as failed.
const summaries = [];
for (const e of entries) {
  const byConfig = all[`${e.model} ${e.batch}`];
  if (!byConfig) continue;  // --summarize: not measured
  const rows = Object.entries(byConfig).map(([k, lines]) => {
    const [who, config] = k.split('|');
    const ok = lines.every((l) => !l.error);
    return {who, config, ok, correct: ok && lines.every((l) => l.correct),
            median_s: ok ? median(lines.map((l) => l.median_s)) : null,
            rel_err: ok ? Math.max(...lines.map((l) => l.rel_err)) : null,
            error: lines.find((l) => l.error)?.error};
  });
  const best = (who) => rows.filter((x) => x.who === who && x.ok)
                            .reduce((a, b) => (a && a.median_s <= b.median_s ? a : b), null);
  const ort = best('ort'), torch = best('pytorch');
  const s = {kind: 'model-summary', commit, cpu, model: e.model, family: e.family,
             batch: e.batch, serving: e.batch !== 1, rounds, ort_best: ort, pytorch_best: torch,
             hetgraph: {}};
  for (const v of variants) {
    const h = rows.find((x) => x.who === 'hetgraph' && x.config === v.name);
    if (!h) continue;
    s.hetgraph[v.name] = {...h, ratio_vs_ort: h.ok && ort ? h.median_s / ort.median_s : null};
  }
  if (torch && ort) s.pytorch_ratio_vs_ort = torch.median_s / ort.median_s;
  write(s);
  summaries.push(s);
  // The same ratio within each round (hetgraph against ONNX Runtime's best configuration of
  // that round), then its median over the rounds: a machine that turns slower for a while
  // (seen here: one configuration's median up to 2.5x apart between rounds, ONNX Runtime's
  // as much as hetgraph's) moves both sides of a round's ratio, where it skews medians taken
  // apart.
  const rr = {kind: 'model-round-ratios', commit, cpu, model: e.model, batch: e.batch,
              serving: e.batch !== 1, rounds, hetgraph: {}};
  for (const v of variants) {
    const mine = byConfig[`hetgraph|${v.name}`] ?? [];
    const ratios = [];
    for (const l of mine) {
      const orts = Object.entries(byConfig).filter(([k]) => k.startsWith('ort|'))
                       .map(([, ls]) => ls.find((x) => x.round === l.round && !x.error))
                       .filter((x) => x);
      if (!l.error && l.correct && orts.length)
        ratios.push(l.median_s / Math.min(...orts.map((x) => x.median_s)));
    }
    if (ratios.length) rr.hetgraph[v.name] = {ratios, median: median(ratios)};
  }
  if (Object.keys(rr.hetgraph).length) {
    write(rr);
    s.round_ratios = rr.hetgraph;
  }
  const f = (x, who) => (x ? `${(x.median_s * 1e3).toFixed(2)} ms` : contenders.has(who) ? 'failed' : 'not run');
  console.log(`${e.model} b${e.batch}: ORT ${f(ort, 'ort')}${ort ? ` (${ort.config})` : ''}, PyTorch ${f(torch, 'pytorch')}` +
              Object.entries(s.hetgraph).map(([n, h]) => `, ${n} ${h.ok ? `${f(h)}${h.ratio_vs_ort ? ` = ${h.ratio_vs_ort.toFixed(2)}x ORT` : ''}` +
                  (h.correct ? '' : ` WRONG (err ${h.rel_err.toExponential(1)})`) : `failed: ${h.error}`}`).join(''));
}

// The whole bench: geometric means of the ratios over models each variant ran correctly.
for (const serving of [false, true]) {
  const group = summaries.filter((s) => s.serving === serving && s.ort_best);
  if (!group.length) continue;
  const total = {kind: 'models-total', commit, cpu, batch: serving ? 'serving' : 1, rounds, models: group.length};
  for (const v of variants) {
    const ok = group.filter((s) => s.hetgraph[v.name]?.correct);
    const ratios = ok.map((s) => s.hetgraph[v.name].ratio_vs_ort);
    total[v.name] = {ran_correctly: ok.length, failed: group.filter((s) => !s.hetgraph[v.name]?.ok).map((s) => s.model),
                     wrong: group.filter((s) => s.hetgraph[v.name]?.ok && !s.hetgraph[v.name].correct).map((s) => s.model),
                     geomean_ratio_vs_ort: ratios.length ? geomean(ratios) : null,
                     worst: ok.length ? ok.reduce((a, b) => (a.hetgraph[v.name].ratio_vs_ort >= b.hetgraph[v.name].ratio_vs_ort ? a : b)).model : null,
                     worst_ratio: ratios.length ? Math.max(...ratios) : null,
                     slower_than_ort: ok.filter((s) => s.hetgraph[v.name].ratio_vs_ort > 1).length};
  }
  const torch = group.filter((s) => s.pytorch_ratio_vs_ort);
  if (torch.length) total.pytorch_geomean_ratio_vs_ort = geomean(torch.map((s) => s.pytorch_ratio_vs_ort));
  write(total);
  console.log(JSON.stringify(total));
  // The totals of the per-round ratios (model-round-ratios).
  const byRound = {kind: 'models-total-by-round', commit, cpu, batch: serving ? 'serving' : 1, rounds,
                   models: group.length};
  for (const v of variants) {
    const ok = group.filter((s) => s.round_ratios?.[v.name]);
    const r = ok.map((s) => s.round_ratios[v.name].median);
    if (!r.length) continue;
    const worst = ok.reduce((a, b) => (a.round_ratios[v.name].median >= b.round_ratios[v.name].median ? a : b));
    byRound[v.name] = {models: ok.length, geomean_ratio_vs_ort: geomean(r), worst: worst.model,
                       worst_ratio: Math.max(...r), slower_than_ort: r.filter((x) => x > 1).length};
  }
  write(byRound);
  console.log(JSON.stringify(byRound));
}
console.log(`results: ${path.relative(root, resultsFile)}`);
fs.rmSync(scratch, {recursive: true, force: true});
