// Reference token ids from HF tokenizers itself (the Rust library, through the npm
// package @anush008/tokenizers), for tests/tokenize/test_exact.py and bench.py.
//
//   node reference.mjs encode TOKENIZER_JSON DOCS_JSONL   -> stdout: one line per document,
//        {"ids": [...], "ids_special": [...], "decoded": "..."}
//        (add_special_tokens false, then true; decoded = decode(ids, skip_special=false))
//   node reference.mjs bench TOKENIZER_JSON DOCS_JSONL SECONDS
//        -> one JSON line: bytes, tokens, passes, seconds, mb_per_s, tokens_per_s of
//           encodeBatch (add_special_tokens false) repeated for at least SECONDS, after one
//           warm-up pass. Run with RAYON_NUM_THREADS=1 for one thread.
import { readFileSync } from 'node:fs';
import tk from '@anush008/tokenizers';

const [mode, tokenizerPath, docsPath, seconds] = process.argv.slice(2);
const tokenizer = tk.Tokenizer.fromFile(tokenizerPath);
const texts = readFileSync(docsPath, 'utf8').split('\n').filter((l) => l.length > 0)
  .map((l) => JSON.parse(l).text);

if (mode === 'encode') {
  const plain = await tokenizer.encodeBatch(texts, { addSpecialTokens: false });
  const special = await tokenizer.encodeBatch(texts, { addSpecialTokens: true });
  const out = [];
  for (let i = 0; i < texts.length; i++) {
    const ids = plain[i].getIds();
    const decoded = await tokenizer.decode(ids, false);
    out.push(JSON.stringify({ ids, ids_special: special[i].getIds(), decoded }));
  }
  process.stdout.write(out.join('\n') + '\n');
} else if (mode === 'bench') {
  const bytes = texts.reduce((n, t) => n + Buffer.byteLength(t, 'utf8'), 0);
  // Warm-up pass (fills HF's word cache, as ours is filled); it also counts the tokens of
  // one pass, so the timed loop measures encodeBatch alone, not reading ids into JS.
  const warm = await tokenizer.encodeBatch(texts, { addSpecialTokens: false });
  const tokensPerPass = warm.reduce((n, e) => n + e.getIds().length, 0);
  let tokens = 0, passes = 0;
  const start = process.hrtime.bigint();
  let elapsed = 0;
  while (elapsed < Number(seconds)) {
    await tokenizer.encodeBatch(texts, { addSpecialTokens: false });
    tokens += tokensPerPass;
    passes++;
    elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  }
  console.log(JSON.stringify({ bytes: bytes * passes, tokens, passes, seconds: elapsed,
    mb_per_s: bytes * passes / elapsed / 1e6, tokens_per_s: tokens / elapsed }));
} else {
  console.error('usage: node reference.mjs encode|bench TOKENIZER_JSON DOCS_JSONL [SECONDS]');
  process.exit(2);
}
