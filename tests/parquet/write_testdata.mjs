// Writes the small DuckDB (and one arrow-rs) files committed in daemon/pipeline/formats/parquet/testdata/,
// which the C++ tests read and mutate (bad files):
//   node write_testdata.mjs ../../daemon/pipeline/formats/parquet/testdata
import { DuckDBInstance } from '@duckdb/node-api';
import * as pw from 'parquet-wasm/node';
import fs from 'node:fs';
import path from 'node:path';

const out = process.argv[2];
const instance = await DuckDBInstance.create(':memory:');
const db = await instance.connect();
const to = (name) => `'${path.join(out, name)}'`;
// 50 rows, every 7th null, uncompressed PLAIN pages (data page v1).
await db.run(`COPY (SELECT CASE WHEN i % 7 = 3 THEN NULL ELSE 'row ' || i END AS text
  FROM range(50) t(i) ORDER BY i) TO ${to('plain.parquet')} (FORMAT parquet, COMPRESSION 'uncompressed')`);
// 100 rows over 10 distinct words: a dictionary page and dictionary-encoded data.
await db.run(`COPY (SELECT 'word ' || (i % 10) AS text FROM range(100) t(i) ORDER BY i)
  TO ${to('dict.parquet')} (FORMAT parquet, COMPRESSION 'uncompressed')`);
// Token lists (with an empty and a null list) in snappy pages.
await db.run(`COPY (SELECT CASE WHEN i = 3 THEN NULL WHEN i = 4 THEN []::INTEGER[]
  ELSE [i, i * 10, i * 100]::INTEGER[] END AS ids FROM range(8) t(i) ORDER BY i)
  TO ${to('tokens.parquet')} (FORMAT parquet, COMPRESSION 'snappy')`);
// Two columns: reading `text` must not read `other`'s chunk.
await db.run(`COPY (SELECT 'row ' || i AS text, repeat('o', 200) || i AS other FROM range(30) t(i)
  ORDER BY i) TO ${to('two_columns.parquet')} (FORMAT parquet, COMPRESSION 'uncompressed')`);
// arrow-rs (parquet-wasm) rewrites it in small PLAIN pages with an OffsetIndex (which
// DuckDB does not write).
const table = pw.readParquet(fs.readFileSync(path.join(out, 'two_columns.parquet')));
const props = new pw.WriterPropertiesBuilder().setDictionaryEnabled(false)
  .setCompression(pw.Compression.UNCOMPRESSED).setDataPageSizeLimit(64).setWriteBatchSize(4)
  .build();
fs.writeFileSync(path.join(out, 'arrow_pages.parquet'), pw.writeParquet(table, props));
console.log(`wrote ${out}`);
