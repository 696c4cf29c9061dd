// Writes the SFT Parquet dataset of test_parquet_sft.py with DuckDB, and its JSONL twin
// from what DuckDB reads back.
//   node write_sft_files.mjs OUT_DIR
// OUT_DIR/sft/part-{0,1}.parquet  input_ids INTEGER[] (every 10th row null), loss_mask
//                                INTEGER[] (0/1, as long as input_ids: a prompt of 0s,
//                                then 1s), spans INTEGER[] (the same as one flat
//                                [start, end) pair)
// OUT_DIR/sft-jsonl/part-{0,1}.jsonl  the same non-null records: input_ids, loss_mask
// OUT_DIR/bad/part-0.parquet      a record whose loss_mask is one value short
// OUT_DIR/pc/part-{0,1}.parquet   prompt VARCHAR, completion VARCHAR (every 9th row's
//                                completion null): prompt/completion text columns
// OUT_DIR/pc-jsonl/part-{0,1}.jsonl  the same non-null records: prompt, completion
import { DuckDBInstance } from '@duckdb/node-api';
import fs from 'node:fs';
import path from 'node:path';

const out = process.argv[2];
const instance = await DuckDBInstance.create(':memory:');
const db = await instance.connect();
await db.run('SET threads = 1');
const q = (s) => s.replaceAll("'", "''");

async function write(dir, name, select) {
  fs.mkdirSync(path.join(out, dir), { recursive: true });
  const file = path.join(out, dir, name);
  await db.run(`COPY (${select}) TO '${q(file)}' (FORMAT parquet, COMPRESSION 'zstd', ` +
               `ROW_GROUP_SIZE 50)`);
  return file;
}

const sft = (s, short) => `SELECT
    CASE WHEN i % 10 = 7 THEN NULL ELSE
      [(x * 17 + i * 3 + ${s}) % 900 + 1 for x in range(n)]::INTEGER[] END AS input_ids,
    CASE WHEN i % 10 = 7 THEN NULL ELSE
      [CASE WHEN x < p THEN 0 ELSE 1 END for x in range(n - ${short})]::INTEGER[] END AS loss_mask,
    CASE WHEN i % 10 = 7 THEN NULL ELSE [p, n]::INTEGER[] END AS spans
  FROM (SELECT i, 3 + (i * 7) % 25 AS n, 1 + (i * 5) % 3 AS p FROM range(${200 + 30 * s}) t(i))
  ORDER BY i`;
for (let s = 0; s < 2; s++) {
  const file = await write('sft', `part-${s}.parquet`, sft(s, 0));
  fs.mkdirSync(path.join(out, 'sft-jsonl'), { recursive: true });
  const reader = await db.runAndReadAll(
    `SELECT input_ids, loss_mask FROM read_parquet('${q(file)}')`);
  const lines = reader.getRowsJson().filter(([ids]) => ids !== null).map(([ids, mask]) =>
    JSON.stringify({ input_ids: ids.map(Number), loss_mask: mask.map(Number) }));
  fs.writeFileSync(path.join(out, 'sft-jsonl', `part-${s}.jsonl`), lines.join('\n') + '\n');
}
await write('bad', 'part-0.parquet', sft(0, 1));

// Prompt/completion text: Unicode and whitespace in both columns.
const pc = (s) => `SELECT
    'question ' || i || ' über ' || repeat('ab ', (i * 3 + ${s}) % 7) AS prompt,
    CASE WHEN i % 9 = 4 THEN NULL ELSE
      repeat('a b ', 1 + (i * 5) % 11) || 'answer ' || (i * 7 + ${s}) || ' ✓' END AS completion
  FROM range(${150 + 20 * s}) t(i) ORDER BY i`;
for (let s = 0; s < 2; s++) {
  const file = await write('pc', `part-${s}.parquet`, pc(s));
  fs.mkdirSync(path.join(out, 'pc-jsonl'), { recursive: true });
  const reader = await db.runAndReadAll(
    `SELECT prompt, completion FROM read_parquet('${q(file)}')`);
  const lines = reader.getRowsJson().filter(([, c]) => c !== null).map(([p, c]) =>
    JSON.stringify({ prompt: p, completion: c }));
  fs.writeFileSync(path.join(out, 'pc-jsonl', `part-${s}.jsonl`), lines.join('\n') + '\n');
}
console.log(`wrote ${out}`);
