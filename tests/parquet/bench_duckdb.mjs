// DuckDB's side of `make bench-parquet` (tests/bench/parquet_bench.py).
//   node bench_duckdb.mjs write CORPUS_JSONL OUT.parquet MB
//       DuckDB writes ~MB megabytes of text (the corpus's documents, each copy suffixed
//       with its row number so no page dictionary-encodes, in a hashed order) as one zstd
//       Parquet file with a single `text` column.
//   node bench_duckdb.mjs write-tokens OUT.parquet ROWS
//       DuckDB writes ROWS rows of a 2,048-id list<int32> column `input_ids` (zstd), ids
//       hashed from (row, position) as records_bench.py recomputes them.
//   node bench_duckdb.mjs read FILE ROUNDS [SQL_EXPR]
//       SET threads=1; SELECT sum(length(text)) FROM FILE, ROUNDS times; prints JSON
//       {"seconds": [...], "sum": n} (the query's own wall time, the process start excluded).
import { DuckDBInstance } from '@duckdb/node-api';

const [mode, ...args] = process.argv.slice(2);
const instance = await DuckDBInstance.create(':memory:');
const db = await instance.connect();
await db.run('SET threads = 1');
const q = (s) => `'${s.replaceAll("'", "''")}'`;

if (mode === 'write') {
  const [corpus, out, mb] = args;
  await db.run(`CREATE TABLE docs AS SELECT text FROM read_json(${q(corpus)}) WHERE length(text) > 0`);
  const bytes = (await db.runAndReadAll('SELECT sum(strlen(text)) FROM docs')).getRowsJson()[0][0];
  const copies = Math.max(1, Math.ceil((Number(mb) * 1e6) / Number(bytes)));
  await db.run('SET threads = 2');
  await db.run(`COPY (SELECT d.text || ' #' || c.i AS text FROM docs d, range(${copies}) c(i)
    ORDER BY hash(c.i, d.text)) TO ${q(out)} (FORMAT parquet, COMPRESSION zstd)`);
  console.log(JSON.stringify({ copies }));
} else if (mode === 'write-tokens') {
  const [out, rows] = args;
  // Ids like a tokenized corpus's: spread over a 128K vocabulary, small ids frequent (a
  // product of two hashed uniforms), so zstd finds no arithmetic pattern to exploit.
  // records_bench.py computes the same ids with numpy for the Megatron twin.
  await db.run('SET threads = 2');
  await db.run(`COPY (SELECT [((((r * 2048 + x) * 2654435761) % 4294967296) % 65536)
      * ((((r * 2048 + x) * 2654435761) % 4294967296) // 65536) // 33554
      for x in range(2048)]::INTEGER[] AS input_ids
    FROM range(${Number(rows)}) t(r) ORDER BY r) TO ${q(out)} (FORMAT parquet, COMPRESSION zstd)`);
} else if (mode === 'read') {
  const [file, rounds, expr = 'sum(length(text))'] = args;
  const seconds = [];
  let sum = 0;
  for (let r = 0; r < Number(rounds); ++r) {
    const t = process.hrtime.bigint();
    const rows = (await db.runAndReadAll(`SELECT ${expr} FROM read_parquet(${q(file)})`)).getRowsJson();
    seconds.push(Number(process.hrtime.bigint() - t) / 1e9);
    sum = rows[0][0];
  }
  console.log(JSON.stringify({ seconds, sum }));
} else {
  console.error('usage: bench_duckdb.mjs write CORPUS OUT MB | write-tokens OUT ROWS | read FILE ROUNDS [EXPR]');
  process.exit(2);
}
