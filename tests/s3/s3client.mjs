// Reference S3 client for tests/s3: the AWS SDK for JavaScript v3 (path-style), used to
// cross-check S3Store/s3_tool against an independent implementation.
//   node s3client.mjs put BUCKET KEY LOCAL_FILE
//   node s3client.mjs get BUCKET KEY LOCAL_FILE
//   node s3client.mjs list BUCKET PREFIX        prints one key per line
//   node s3client.mjs head BUCKET KEY           exits 3 when the key is missing
// Endpoint and credentials come from AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY; region from AWS_REGION (default us-east-1).
import { readFileSync, writeFileSync } from "node:fs";
import {
  S3Client, PutObjectCommand, GetObjectCommand, ListObjectsV2Command, HeadObjectCommand,
} from "@aws-sdk/client-s3";

const [cmd, bucket, key, file] = process.argv.slice(2);
const client = new S3Client({
  endpoint: process.env.AWS_ENDPOINT_URL,
  region: process.env.AWS_REGION || "us-east-1",
  forcePathStyle: true,
  credentials: {
    accessKeyId: process.env.AWS_ACCESS_KEY_ID,
    secretAccessKey: process.env.AWS_SECRET_ACCESS_KEY,
  },
});

try {
  if (cmd === "put") {
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: readFileSync(file) }));
  } else if (cmd === "get") {
    const out = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
    writeFileSync(file, Buffer.from(await out.Body.transformToByteArray()));
  } else if (cmd === "list") {
    let token;
    do {
      const out = await client.send(new ListObjectsV2Command(
          { Bucket: bucket, Prefix: key, ContinuationToken: token }));
      for (const o of out.Contents || []) console.log(o.Key);
      token = out.IsTruncated ? out.NextContinuationToken : undefined;
    } while (token);
  } else if (cmd === "head") {
    await client.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
  } else {
    console.error(`unknown command ${cmd}`);
    process.exit(2);
  }
} catch (err) {
  if (cmd === "head" && err.name === "NotFound") process.exit(3);
  console.error(`s3client ${cmd}: ${err.name}: ${err.message}`);
  process.exit(1);
}
