// Writes the Parquet test files with real writers and, for each, what DuckDB reads back.
//   node write_files.mjs OUT_DIR
// DuckDB (@duckdb/node-api) writes every codec it has (COPY ... (FORMAT parquet,
// COMPRESSION c, ROW_GROUP_SIZE n, PARQUET_VERSION v)); arrow-rs (parquet-wasm) rewrites
// a DuckDB file with the encodings DuckDB does not choose (DELTA_LENGTH_BYTE_ARRAY,
// DELTA_BYTE_ARRAY, DELTA_BINARY_PACKED, dictionary off, data page v2, LZ4_RAW, BROTLI).
// OUT_DIR/manifest.json lists {file, field, kind, expected[, error]}; each expected file
// holds one JSON line per row, as DuckDB reads the file back: null, {"text": s} or
// {"tokens": [...]}, the format parquet_dump prints.
import { DuckDBInstance } from '@duckdb/node-api';
import * as pw from 'parquet-wasm/node';
import fs from 'node:fs';
import path from 'node:path';

const out = process.argv[2];
fs.mkdirSync(out, { recursive: true });
const instance = await DuckDBInstance.create(':memory:');
const db = await instance.connect();
await db.run('SET threads = 1');
const manifest = [];

const q = (s) => s.replaceAll("'", "''");

// Text rows: varied lengths, unicode, escapes, repeats (dictionaries), every 7th null.
await db.run(`CREATE TABLE texts AS SELECT i,
  CASE WHEN i % 7 = 3 THEN NULL
       WHEN i % 5 = 0 THEN 'repeated value ' || (i % 3)
       ELSE 'row ' || i || ' "quoted" \\ tab	é 字 ' || repeat('x', i % 97) || chr(10) || 'end'
  END AS text,
  CASE WHEN i % 13 = 5 THEN NULL
       ELSE {'text': CASE WHEN i % 11 = 0 THEN NULL ELSE 'meta ' || i END, 'id': i} END AS meta
  FROM range(3000) t(i)`);
// Token rows: list<int32> and list<int64> with empty and null lists.
await db.run(`CREATE TABLE toks AS SELECT i,
  CASE WHEN i % 9 = 4 THEN NULL WHEN i % 6 = 1 THEN []::INTEGER[]
       ELSE [x * 7 + i for x in range(i % 50)]::INTEGER[] END AS ids32,
  CASE WHEN i % 9 = 5 THEN NULL WHEN i % 6 = 2 THEN []::BIGINT[]
       ELSE [x * 100003 + i for x in range(i % 40)]::BIGINT[] END AS ids64,
  [i, i + 1, i + 2, i + 3]::INTEGER[4] AS fixed
  FROM range(2500) t(i)`);

async function readback(file, sql, kind, expectedName) {
  const reader = await db.runAndReadAll(sql.replace('$F', `'${q(file)}'`));
  const lines = reader.getRowsJson().map(([v]) => {
    if (v === null) return 'null';
    if (kind === 'text') return JSON.stringify({ text: v });
    return JSON.stringify({ tokens: v.map(Number) });
  });
  fs.writeFileSync(path.join(out, expectedName), lines.join('\n') + (lines.length ? '\n' : ''));
}

async function add(name, field, kind, selectExpr) {
  const file = path.join(out, name);
  const expected = `${name}.${field}.expected.jsonl`;
  await readback(file, `SELECT ${selectExpr} FROM read_parquet($F)`, kind, expected);
  manifest.push({ file: name, field, kind, expected });
}

async function duck(name, table, cols, options) {
  await db.run(`COPY (SELECT ${cols} FROM ${table} ORDER BY i) TO '${q(path.join(out, name))}'
    (FORMAT parquet, ${options})`);
}

// DuckDB: every codec, data page v1 and v2, small row groups.
for (const codec of ['zstd', 'snappy', 'gzip', 'uncompressed', 'brotli', 'lz4']) {
  for (const version of ['V1', 'V2']) {
    const name = `duck_text_${codec}_${version}.parquet`;
    await duck(name, 'texts', 'text, meta', `COMPRESSION '${codec}', ROW_GROUP_SIZE 1000, PARQUET_VERSION ${version}`);
    await add(name, 'text', 'text', 'text');
  }
}
await add('duck_text_zstd_V1.parquet', 'meta.text', 'text', 'meta.text');
for (const version of ['V1', 'V2']) {
  const name = `duck_tokens_${version}.parquet`;
  await duck(name, 'toks', 'ids32, ids64, fixed', `COMPRESSION 'zstd', ROW_GROUP_SIZE 700, PARQUET_VERSION ${version}`);
  await add(name, 'ids32', 'tokens', 'ids32');
  await add(name, 'ids64', 'tokens', 'ids64');
  await add(name, 'fixed', 'tokens', 'fixed');
}
// Pages with no values at all (every row null, or an empty list): zero-byte page bodies
// in every codec.
for (const codec of ['zstd', 'snappy', 'gzip', 'brotli', 'lz4']) {
  const name = `duck_all_null_${codec}.parquet`;
  await db.run(`COPY (SELECT NULL::VARCHAR AS text,
    CASE WHEN r % 2 = 0 THEN NULL ELSE []::INTEGER[] END AS ids FROM range(100) t(r))
    TO '${q(path.join(out, name))}' (FORMAT parquet, COMPRESSION '${codec}', PARQUET_VERSION V2)`);
  await add(name, 'text', 'text', 'text');
  await add(name, 'ids', 'tokens', 'ids');
}
// Many small row groups.
await duck('duck_small_groups.parquet', 'texts', 'text', `COMPRESSION 'snappy', ROW_GROUP_SIZE 10`);
await add('duck_small_groups.parquet', 'text', 'text', 'text');
// Low-cardinality text: DuckDB writes a dictionary page and dictionary-encoded pages.
await db.run(`COPY (SELECT CASE WHEN i % 13 = 0 THEN NULL ELSE 'word ' || (i % 20) END AS text
  FROM range(5000) t(i) ORDER BY i) TO '${q(path.join(out, 'duck_dict.parquet'))}' (FORMAT parquet, COMPRESSION 'zstd')`);
await add('duck_dict.parquet', 'text', 'text', 'text');
// Large strings (> 1 MB each).
await db.run(`COPY (SELECT CASE WHEN i = 2 THEN NULL ELSE repeat(chr((97 + i)::INTEGER), (1500000 + i)::BIGINT) || ' tail' END AS text
  FROM range(5) t(i) ORDER BY i) TO '${q(path.join(out, 'duck_large.parquet'))}' (FORMAT parquet, COMPRESSION 'zstd')`);
await add('duck_large.parquet', 'text', 'text', 'text');
// A token id outside int32 (an error naming the row and value).
await db.run(`COPY (SELECT [1, 2]::BIGINT[] AS ids UNION ALL SELECT [3, 4294967296]::BIGINT[])
  TO '${q(path.join(out, 'duck_overflow.parquet'))}' (FORMAT parquet)`);
manifest.push({ file: 'duck_overflow.parquet', field: 'ids', kind: 'tokens',
                error: 'token id 4294967296 does not fit int32' });
// A negative token id (an error naming the row and value, as JSONL and MDS refuse them).
await db.run(`COPY (SELECT [1, 2]::INTEGER[] AS ids UNION ALL SELECT [3, -5]::INTEGER[])
  TO '${q(path.join(out, 'duck_negative.parquet'))}' (FORMAT parquet)`);
manifest.push({ file: 'duck_negative.parquet', field: 'ids', kind: 'tokens',
                error: 'token id -5 is negative' });
// Unsigned token ids (UINTEGER / USMALLINT lists: INT32 annotated UINT_32 / UINT_16), and
// one at 2^31 + 1, which is stored as a negative INT32.
await db.run(`COPY (SELECT [i, i * 1000, 2147483647]::UINTEGER[] AS u32, [i, 65535]::USMALLINT[] AS u16
  FROM range(300) t(i)) TO '${q(path.join(out, 'duck_unsigned.parquet'))}' (FORMAT parquet)`);
await add('duck_unsigned.parquet', 'u32', 'tokens', 'u32');
await add('duck_unsigned.parquet', 'u16', 'tokens', 'u16');
await db.run(`COPY (SELECT [1, 2]::UINTEGER[] AS ids UNION ALL SELECT [3, 2147483649]::UINTEGER[])
  TO '${q(path.join(out, 'duck_uint_overflow.parquet'))}' (FORMAT parquet)`);
manifest.push({ file: 'duck_uint_overflow.parquet', field: 'ids', kind: 'tokens',
                error: 'token id 2147483649 does not fit int32' });
// A top-level column whose name holds a dot.
await db.run(`COPY (SELECT 'dotted ' || i AS "meta.url" FROM range(10) t(i))
  TO '${q(path.join(out, 'duck_dotted_name.parquet'))}' (FORMAT parquet)`);
await add('duck_dotted_name.parquet', 'meta.url', 'text', '"meta.url"');
// A null element inside a list (a list of token ids cannot hold one).
await db.run(`COPY (SELECT [1, 2]::INTEGER[] AS ids UNION ALL SELECT [3, NULL]::INTEGER[])
  TO '${q(path.join(out, 'duck_null_element.parquet'))}' (FORMAT parquet)`);
manifest.push({ file: 'duck_null_element.parquet', field: 'ids', kind: 'tokens',
                error: 'null token id (list element 1)' });

// arrow-rs through parquet-wasm: rewrite DuckDB files with chosen encodings.
function arrow(src, name, configure, rowGroupSize = 800) {
  const table = pw.readParquet(fs.readFileSync(path.join(out, src)));
  const props = configure(new pw.WriterPropertiesBuilder()
    .setMaxRowGroupSize(rowGroupSize).setDataPageSizeLimit(4096).setWriteBatchSize(128)).build();
  fs.writeFileSync(path.join(out, name), pw.writeParquet(table, props));
}
const E = pw.Encoding, C = pw.Compression, V = pw.WriterVersion;
// Encodings set per string column (a string encoding on meta.id, an INT32, is refused).
const strings = (b, e) => b.setColumnEncoding('text', e).setColumnEncoding('meta.text', e);
const textVariants = [
  ['plain_v1', (b) => strings(b.setDictionaryEnabled(false), E.PLAIN).setCompression(C.SNAPPY)],
  ['dict_lz4raw_v2', (b) => b.setDictionaryEnabled(true).setCompression(C.LZ4_RAW).setWriterVersion(V.V2)],
  ['dlba_zstd_v1', (b) => strings(b.setDictionaryEnabled(false), E.DELTA_LENGTH_BYTE_ARRAY).setCompression(C.ZSTD)],
  ['dlba_gzip_v2', (b) => strings(b.setDictionaryEnabled(false), E.DELTA_LENGTH_BYTE_ARRAY).setCompression(C.GZIP).setWriterVersion(V.V2)],
  ['dba_brotli_v2', (b) => strings(b.setDictionaryEnabled(false), E.DELTA_BYTE_ARRAY).setCompression(C.BROTLI).setWriterVersion(V.V2)],
  ['dba_none_v1', (b) => strings(b.setDictionaryEnabled(false), E.DELTA_BYTE_ARRAY).setCompression(C.UNCOMPRESSED)],
];
for (const [tag, configure] of textVariants) {
  const name = `arrow_text_${tag}.parquet`;
  arrow('duck_text_zstd_V1.parquet', name, configure);
  await add(name, 'text', 'text', 'text');
  await add(name, 'meta.text', 'text', 'meta.text');
}
// Many small row groups (7 rows each).
arrow('duck_text_zstd_V1.parquet', 'arrow_small_groups.parquet', (b) => b.setCompression(C.ZSTD), 7);
await add('arrow_small_groups.parquet', 'text', 'text', 'text');
arrow('duck_tokens_V1.parquet', 'arrow_tokens_small_groups.parquet', (b) => b.setCompression(C.SNAPPY), 7);
await add('arrow_tokens_small_groups.parquet', 'ids32', 'tokens', 'ids32');
const tokenVariants = [
  ['dbp_v1', (b) => b.setDictionaryEnabled(false).setEncoding(E.DELTA_BINARY_PACKED).setCompression(C.ZSTD)],
  ['dbp_v2', (b) => b.setDictionaryEnabled(false).setEncoding(E.DELTA_BINARY_PACKED).setCompression(C.LZ4_RAW).setWriterVersion(V.V2)],
  ['dict_v2', (b) => b.setDictionaryEnabled(true).setCompression(C.SNAPPY).setWriterVersion(V.V2)],
  ['plain_v1', (b) => b.setDictionaryEnabled(false).setEncoding(E.PLAIN).setCompression(C.UNCOMPRESSED)],
];
for (const [tag, configure] of tokenVariants) {
  const name = `arrow_tokens_${tag}.parquet`;
  arrow('duck_tokens_V1.parquet', name, configure);
  for (const col of ['ids32', 'ids64', 'fixed']) await add(name, col, 'tokens', col);
}
fs.writeFileSync(path.join(out, 'manifest.json'), JSON.stringify(manifest, null, 1));
console.log(`wrote ${manifest.length} cases to ${out}`);
