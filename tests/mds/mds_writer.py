"""A small MDS writer that follows MosaicML Streaming's own source (mosaicml/streaming:
streaming/base/format/mds/writer.py and encodings.py, base/format/base/writer.py,
base/compression.py, base/hashing.py), so tests read shards laid out the way Streaming
lays them out, not the way Zephon's reader expects them.

What it does as Streaming does:
  * columns sorted by name; column_sizes from each encoding's fixed size (None if
    variable); a sample is a uint32 size per variable-size column, then every column's
    encoded value; a value already of type bytes is stored as is (mds_encode);
  * a shard is uint32 n | uint32 offsets[n+1] (absolute) | the shard config JSON
    (json.dumps(get_config(), sort_keys=True)) | samples; a sample that would push the
    shard past size_limit (counting 4 + 4 + len(config) per shard and 4 per sample)
    starts a new shard first;
  * shard.NNNNN.mds, compressed to shard.NNNNN.mds.<ext>; raw_data/zip_data {basename,
    bytes, hashes}; index.json = json.dump({"version": 2, "shards": [...]}, sort_keys=True);
  * compressions: zstd (python-zstd's compress = ZSTD_compress, default level 3), gz
    (gzip.compress, level 9), bz2 (bz2.compress, level 9), br (brotli.compress, quality
    11), snappy (python-snappy's compress = raw snappy_compress); the zstd and snappy
    Python modules are not in Debian, so the same C libraries they wrap are called
    through ctypes;
  * hashes: hashlib's hexdigest; xxhash's (xxh32, xxh64, xxh3_64, xxh128) hexdigest
    through libxxhash (canonical, big-endian).
"""
from __future__ import annotations

import bz2
import ctypes
import ctypes.util
import gzip
import hashlib
import json
import os
from typing import Any

import numpy as np

# --- compression (streaming/base/compression.py) -------------------------------------


def _lib(name: str) -> ctypes.CDLL:
    path = ctypes.util.find_library(name)
    if path is None:
        raise RuntimeError(f"lib{name} not found (apt-get install lib{name}-dev)")
    return ctypes.CDLL(path)


def _zstd(data: bytes, level: int) -> bytes:
    lib = _lib("zstd")
    lib.ZSTD_compressBound.restype = ctypes.c_size_t
    lib.ZSTD_compressBound.argtypes = [ctypes.c_size_t]
    lib.ZSTD_compress.restype = ctypes.c_size_t
    lib.ZSTD_compress.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p,
                                  ctypes.c_size_t, ctypes.c_int]
    lib.ZSTD_isError.argtypes = [ctypes.c_size_t]
    bound = lib.ZSTD_compressBound(len(data))
    out = ctypes.create_string_buffer(bound)
    n = lib.ZSTD_compress(out, bound, data, len(data), level)
    if lib.ZSTD_isError(n):
        raise RuntimeError("ZSTD_compress failed")
    return out.raw[:n]


def _snappy(data: bytes) -> bytes:
    lib = _lib("snappy")
    lib.snappy_max_compressed_length.restype = ctypes.c_size_t
    lib.snappy_max_compressed_length.argtypes = [ctypes.c_size_t]
    lib.snappy_compress.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p,
                                    ctypes.POINTER(ctypes.c_size_t)]
    bound = lib.snappy_max_compressed_length(len(data))
    out = ctypes.create_string_buffer(bound)
    n = ctypes.c_size_t(bound)
    if lib.snappy_compress(data, len(data), out, ctypes.byref(n)) != 0:
        raise RuntimeError("snappy_compress failed")
    return out.raw[:n.value]


def _brotli(data: bytes, level: int) -> bytes:
    import brotli  # Debian python3-brotli
    return brotli.compress(data, quality=level)


# family -> (default level, valid levels, compress(data, level))
_FAMILIES = {
    "br": (11, range(12), _brotli),
    "bz2": (9, range(1, 10), lambda d, lv: bz2.compress(d, lv)),
    "gz": (9, range(10), lambda d, lv: gzip.compress(d, lv)),
    "snappy": (None, None, lambda d, lv: _snappy(d)),
    "zstd": (3, range(1, 23), _zstd),
}


def compress(algo: str, data: bytes) -> bytes:
    family, _, level = algo.partition(":")
    default, levels, fn = _FAMILIES[family]
    if level:
        if levels is None or int(level) not in levels:
            raise ValueError(f"invalid compression {algo}")
        return fn(data, int(level))
    return fn(data, default)


def extension(algo: str) -> str:
    return algo.partition(":")[0]


# --- hashing (streaming/base/hashing.py) ---------------------------------------------


def _xxh(algo: str, data: bytes) -> str:
    lib = _lib("xxhash")
    if algo == "xxh32":
        lib.XXH32.restype = ctypes.c_uint32
        lib.XXH32.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint32]
        return f"{lib.XXH32(data, len(data), 0):08x}"
    if algo == "xxh64":
        lib.XXH64.restype = ctypes.c_uint64
        lib.XXH64.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint64]
        return f"{lib.XXH64(data, len(data), 0):016x}"
    if algo == "xxh3_64":
        lib.XXH3_64bits.restype = ctypes.c_uint64
        lib.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        return f"{lib.XXH3_64bits(data, len(data)):016x}"

    class Hash128(ctypes.Structure):
        _fields_ = [("low64", ctypes.c_uint64), ("high64", ctypes.c_uint64)]

    lib.XXH3_128bits.restype = Hash128
    lib.XXH3_128bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    h = lib.XXH3_128bits(data, len(data))
    return f"{h.high64:016x}{h.low64:016x}"


XXHASHES = ("xxh32", "xxh64", "xxh3_64", "xxh128", "xxh3_128")


def get_hash(algo: str, data: bytes) -> str:
    if algo in XXHASHES:
        return _xxh("xxh128" if algo == "xxh3_128" else algo, data)
    return getattr(hashlib, algo)(data).hexdigest()


# --- encodings (streaming/base/format/mds/encodings.py) ------------------------------

_SCALARS = {"uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64,
            "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
            "float16": np.float16, "float32": np.float32, "float64": np.float64}
_DTYPE_CODE = {"uint8": 8, "int8": 9, "uint16": 16, "int16": 17, "float16": 18, "uint32": 32,
               "int32": 33, "float32": 34, "uint64": 64, "int64": 65, "float64": 66}
_SHAPE_DTYPES = ["uint8", "uint16", "uint32", "uint64"]


def _parse_ndarray(encoding: str):
    args = encoding.split(":")[1:] if ":" in encoding else []
    dtype = args[0] if args else None
    shape = tuple(map(int, args[1].split(","))) if len(args) > 1 else None
    return dtype, shape


def encoded_size(encoding: str) -> int | None:
    if encoding == "int":
        return 8
    if encoding in _SCALARS:
        return np.dtype(_SCALARS[encoding]).itemsize
    if encoding.startswith("ndarray"):
        dtype, shape = _parse_ndarray(encoding)
        if dtype is None or shape is None:
            return None
        return int(np.prod(shape)) * np.dtype(dtype).itemsize
    return None  # str, bytes, json, ...


def encode(encoding: str, obj: Any) -> bytes:
    if isinstance(obj, bytes):  # mds_encode stores bytes as they are
        return obj
    if encoding == "str":
        return obj.encode("utf-8")
    if encoding == "int":
        return np.int64(obj).tobytes()
    if encoding in _SCALARS:
        return _SCALARS[encoding](obj).tobytes()
    if encoding == "json":
        return json.dumps(obj).encode("utf-8")
    if encoding.startswith("ndarray"):
        dtype, shape = _parse_ndarray(encoding)
        parts = []
        if dtype is None:
            parts.append(bytes([_DTYPE_CODE[obj.dtype.name]]))
        elif obj.dtype != dtype:
            raise ValueError(f"Wrong dtype: expected {dtype}, got {obj.dtype.name}.")
        if obj.size == 0:
            raise ValueError("Attempting to encode a numpy array with 0 elements.")
        if shape is None:
            shape_arr = np.array(obj.shape, np.int64)
            if len(shape_arr) == 0 or shape_arr.min() <= 0:
                raise ValueError("bad shape")
            x = shape_arr.max()
            k = 0 if x < (1 << 8) else 1 if x < (1 << 16) else 2 if x < (1 << 32) else 3
            parts.append(bytes([(len(obj.shape) << 2) | k]))
            parts.append(shape_arr.astype(_SHAPE_DTYPES[k]).tobytes())
        elif obj.shape != shape:
            raise ValueError(f"Wrong shape: expected {shape}, got {obj.shape}.")
        parts.append(obj.tobytes())
        return b"".join(parts)
    raise ValueError(f"encoding {encoding} not in this writer")


# --- the writer (mds/writer.py, base/writer.py JointWriter) ---------------------------


class MDSWriter:
    def __init__(self, *, columns: dict[str, str], out: str, compression: str | None = None,
                 hashes: list[str] | None = None, size_limit: int | None = 1 << 26) -> None:
        self.out = out
        self.compression = compression or None
        self.hashes = hashes or []
        if list(self.hashes) != sorted(self.hashes):
            raise ValueError("Hashes must be unique and in sorted order.")
        self.size_limit = size_limit or None
        self.column_names = sorted(columns)
        self.column_encodings = [columns[n] for n in self.column_names]
        self.column_sizes = [encoded_size(e) for e in self.column_encodings]
        self.config_data = json.dumps(self.get_config(), sort_keys=True).encode("utf-8")
        self.extra_bytes_per_shard = 4 + 4 + len(self.config_data)
        self.extra_bytes_per_sample = 4
        self.shards: list[dict] = []
        os.makedirs(out, exist_ok=True)
        self._reset_cache()

    def _reset_cache(self) -> None:
        self.new_samples: list[bytes] = []
        self.new_shard_size = self.extra_bytes_per_shard

    def get_config(self) -> dict[str, Any]:
        return {"version": 2, "format": "mds", "compression": self.compression,
                "hashes": self.hashes, "size_limit": self.size_limit,
                "column_names": self.column_names, "column_encodings": self.column_encodings,
                "column_sizes": self.column_sizes}

    def encode_sample(self, sample: dict[str, Any]) -> bytes:
        sizes, data = [], []
        for key, encoding, size in zip(self.column_names, self.column_encodings,
                                       self.column_sizes):
            datum = encode(encoding, sample[key])
            if size is None:
                sizes.append(len(datum))
            elif size != len(datum):
                raise KeyError("Unexpected data size")
            data.append(datum)
        return np.array(sizes, np.uint32).tobytes() + b"".join(data)

    def write(self, sample: dict[str, Any]) -> None:
        new_sample = self.encode_sample(sample)
        new_sample_size = len(new_sample) + self.extra_bytes_per_sample
        if self.size_limit and self.size_limit < self.new_shard_size + new_sample_size:
            self.flush_shard()
            self._reset_cache()
        self.new_samples.append(new_sample)
        self.new_shard_size += new_sample_size

    def encode_joint_shard(self) -> bytes:
        num_samples = np.uint32(len(self.new_samples))
        sizes = list(map(len, self.new_samples))
        offsets = np.array([0] + sizes).cumsum().astype(np.uint32)
        offsets += len(num_samples.tobytes()) + len(offsets.tobytes()) + len(self.config_data)
        return (num_samples.tobytes() + offsets.tobytes() + self.config_data +
                b"".join(self.new_samples))

    def _info(self, data: bytes, basename: str) -> dict[str, Any]:
        return {"basename": basename, "bytes": len(data),
                "hashes": {algo: get_hash(algo, data) for algo in self.hashes}}

    def flush_shard(self) -> None:
        raw_basename = f"shard.{len(self.shards):05}.mds"
        raw_data = self.encode_joint_shard()
        raw_info = self._info(raw_data, raw_basename)
        zip_info = None
        data, basename = raw_data, raw_basename
        if self.compression:
            zip_basename = f"{raw_basename}.{extension(self.compression)}"
            data = compress(self.compression, raw_data)
            zip_info = self._info(data, zip_basename)
            basename = zip_basename
        with open(os.path.join(self.out, basename), "wb") as f:
            f.write(data)
        obj = {"samples": len(self.new_samples), "raw_data": raw_info, "zip_data": zip_info}
        obj.update(self.get_config())
        self.shards.append(obj)

    def finish(self) -> None:
        if self.new_samples:
            self.flush_shard()
            self._reset_cache()
        with open(os.path.join(self.out, "index.json"), "w") as f:
            json.dump({"version": 2, "shards": self.shards}, f, sort_keys=True)

    def __enter__(self) -> "MDSWriter":
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is None:
            self.finish()
