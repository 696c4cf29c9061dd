// What DuckDB reads back from one column of a Parquet file, one JSON line per row in the
// form parquet_dump prints: null, {"text": s} or {"tokens": [...]}.
//   node read_column.mjs FILE EXPR text|tokens
import { DuckDBInstance } from '@duckdb/node-api';

const [file, expr, kind] = process.argv.slice(2);
const instance = await DuckDBInstance.create(':memory:');
const db = await instance.connect();
const reader = await db.runAndReadAll(
  `SELECT ${expr} FROM read_parquet('${file.replaceAll("'", "''")}')`);
for (const [v] of reader.getRowsJson()) {
  if (v === null) console.log('null');
  else console.log(JSON.stringify(kind === 'text' ? { text: v } : { tokens: v.map(Number) }));
}
