// The Rust tokenizers library on the inputs tokenizer_bench uses: the
// hostile corpus lines repeated to about 1 MB, one encodeBatch per round on
// one thread (RAYON_NUM_THREADS=1 is set before the library loads).
// Usage: node bench_reference.js FIXTURE_DIR [ROUNDS]
'use strict';
process.env.RAYON_NUM_THREADS = '1';
process.env.TOKENIZERS_PARALLELISM = 'false';
const fs = require('fs');
const path = require('path');
const tk = require('@anush008/tokenizers');

const dir = process.argv[2];
const rounds = Number(process.argv[3] || 3);
const lines = fs.readFileSync(path.join(__dirname, 'corpus/hostile.jsonl'), 'utf8')
  .split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l));
const inputs = [];
let bytes = 0;
for (let i = 0; bytes < 1 << 20; i++) {
  const s = lines[i % lines.length];
  if (s.length === 0) continue;
  inputs.push(s);
  bytes += Buffer.byteLength(s);
}

async function main() {
  console.log(`${inputs.length} inputs, ${bytes} bytes, best of ${rounds} rounds, one thread`);
  for (const name of ['bert_vocab', 'wordpiece_trained', 'gpt2', 'llama3', 'qwen3', 'gemma3', 'unigram_always',
    'spm_nmt_nfkc']) {
    const json = path.join(dir, name, 'tokenizer.json');
    const t = tk.Tokenizer.fromFile(fs.existsSync(json) ? json : path.join(dir, name, 'reference.json'));
    let best = Infinity;
    let tokens = 0;
    for (let r = 0; r < rounds; r++) {
      const t0 = process.hrtime.bigint();
      const out = await t.encodeBatch(inputs);
      const s = Number(process.hrtime.bigint() - t0) / 1e9;
      tokens = out.reduce((a, e) => a + e.getLength(), 0);
      best = Math.min(best, s);
    }
    console.log(`${name.padEnd(22)} ${(bytes / best / 1e6).toFixed(2).padStart(10)} MB/s ${String(tokens).padStart(12)} tokens`);
  }
}
main().catch((e) => { console.error(e); process.exit(1); });
