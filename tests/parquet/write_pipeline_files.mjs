// Writes the Parquet datasets of test_parquet_pipeline.py with DuckDB, and the same
// records as JSONL from what DuckDB reads back (null rows left out, as on_null="skip"
// leaves them out of the samples).
//   node write_pipeline_files.mjs OUT_DIR
// OUT_DIR/tokens/part-{0,1,2}.parquet  list<int32> input_ids (every 9th row null) and
//                                     list<int64> ids64 (the same lists)
// OUT_DIR/tokens-changed/part-1.parquet tokens/part-1.parquet rewritten with other ids
// OUT_DIR/texts/part-{0,1}.parquet     text (every 7th row null) and struct meta.text
// OUT_DIR/tokens-jsonl/, texts-jsonl/, meta-jsonl/: the JSONL twins.
import { DuckDBInstance } from '@duckdb/node-api';
import fs from 'node:fs';
import path from 'node:path';

const out = process.argv[2];
const instance = await DuckDBInstance.create(':memory:');
const db = await instance.connect();
await db.run('SET threads = 1');
const q = (s) => s.replaceAll("'", "''");

async function write(dir, name, select, options) {
  fs.mkdirSync(path.join(out, dir), { recursive: true });
  const file = path.join(out, dir, name);
  await db.run(`COPY (${select}) TO '${q(file)}' (FORMAT parquet, ${options})`);
  return file;
}

async function twin(file, expr, dir, name, key) {
  fs.mkdirSync(path.join(out, dir), { recursive: true });
  const reader = await db.runAndReadAll(`SELECT ${expr} FROM read_parquet('${q(file)}')`);
  const lines = reader.getRowsJson().filter(([v]) => v !== null).map(([v]) =>
    JSON.stringify({ [key]: key === 'input_ids' ? v.map(Number) : v }));
  fs.writeFileSync(path.join(out, dir, name), lines.join('\n') + '\n');
}

const tokens = (s, salt) => `SELECT ids::INTEGER[] AS input_ids, ids::BIGINT[] AS ids64
    FROM (SELECT i, CASE WHEN i % 9 = 4 THEN NULL
                   ELSE [(x * 31 + i * 7 + ${s} + ${salt}) % 5000 for x in range(1 + (i * 13) % 90)]
                 END AS ids
          FROM range(${400 + 50 * s}) t(i)) ORDER BY i`;
for (let s = 0; s < 3; s++) {
  const file = await write('tokens', `part-${s}.parquet`, tokens(s, 0),
    `COMPRESSION 'zstd', ROW_GROUP_SIZE 100`);
  await twin(file, 'input_ids', 'tokens-jsonl', `part-${s}.jsonl`, 'input_ids');
}
await write('tokens-changed', 'part-1.parquet', tokens(1, 17),
  `COMPRESSION 'zstd', ROW_GROUP_SIZE 100`);
for (let s = 0; s < 2; s++) {
  const file = await write('texts', `part-${s}.parquet`, `SELECT
      CASE WHEN i % 7 = 3 THEN NULL
           ELSE repeat('ab a b ', 1 + (i * 5) % 40) || 'row ' || i || ' of ${s}'
      END AS text,
      {'text': CASE WHEN i % 11 = 0 THEN NULL ELSE 'a ab ' || repeat('b', i % 30) END} AS meta
    FROM range(${300 + 40 * s}) t(i) ORDER BY i`,
    `COMPRESSION 'snappy', ROW_GROUP_SIZE 64, PARQUET_VERSION V2`);
  await twin(file, 'text', 'texts-jsonl', `part-${s}.jsonl`, 'text');
  await twin(file, 'meta.text', 'meta-jsonl', `part-${s}.jsonl`, 'text');
}
console.log(`wrote ${out}`);
