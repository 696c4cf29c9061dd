"""``tokenize(tokenizer_id=...)`` as upstream spells it: a local path, a Hugging Face model
id found in the local Hugging Face cache, or ``"__fallback__"``, a small built-in
tokenizer for tests.

No network is used: a model id resolves only through a snapshot already in the cache
(``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``~/.cache/huggingface/hub``:
``models--org--name/snapshots/<revision>/``, the revision ``refs/main`` names, else the
only or newest snapshot). An id that is neither a local path nor cached fails naming
where it was looked for and how to fetch it.
"""
from __future__ import annotations

import json
import os
import re
from typing import Any

from . import errors

FALLBACK_ID = "__fallback__"
# org/name or name, as the Hub spells model ids.
_MODEL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model")


def _invalid(message: str) -> errors.InvalidOptionError:
    return errors.InvalidOptionError(f"Pipeline.tokenize: {message}", errors.INVALID_ARGUMENT)


def hub_cache_dir() -> str:
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return os.environ[var]
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface")
    return os.path.join(home, "hub")


def _snapshot(model_dir: str) -> str | None:
    """The snapshot directory refs/main names, else the only or newest one."""
    snapshots = os.path.join(model_dir, "snapshots")
    ref = os.path.join(model_dir, "refs", "main")
    if os.path.isfile(ref):
        with open(ref, encoding="utf-8") as f:
            revision = f.read().strip()
        if revision and os.path.isdir(os.path.join(snapshots, revision)):
            return os.path.join(snapshots, revision)
    try:
        entries = [os.path.join(snapshots, e) for e in os.listdir(snapshots)]
    except OSError:
        return None
    entries = [e for e in entries if os.path.isdir(e)]
    return max(entries, key=os.path.getmtime) if entries else None


def resolve(tokenizer_id: str) -> "str | _Fallback":
    """The tokenizer `tokenizer_id` names: a path (str) for tokenize's `tokenizer`, or the
    fallback tokenizer object."""
    if not isinstance(tokenizer_id, (str, os.PathLike)) or not os.fspath(tokenizer_id):
        raise _invalid(f"tokenizer_id must be a non-empty str, not {tokenizer_id!r}")
    tokenizer_id = os.fspath(tokenizer_id)
    if tokenizer_id == FALLBACK_ID:
        return fallback_tokenizer()
    if "://" in tokenizer_id or os.path.exists(tokenizer_id):
        return tokenizer_id
    hub = hub_cache_dir()
    if not _MODEL_ID.match(tokenizer_id):
        raise _invalid(f"tokenizer_id {tokenizer_id!r} is neither an existing path nor a "
                       "Hugging Face model id (org/name)")
    model_dir = os.path.join(hub, "models--" + tokenizer_id.replace("/", "--"))
    snapshot = _snapshot(model_dir)
    if snapshot is not None and any(os.path.isfile(os.path.join(snapshot, f))
                                    for f in _TOKENIZER_FILES):
        return snapshot
    where = (f"{snapshot} holds no {' or '.join(_TOKENIZER_FILES)}" if snapshot
             else f"no snapshot under {model_dir}")
    raise errors.NotFoundError(
        f"Pipeline.tokenize: tokenizer_id {tokenizer_id!r} is not a local path and is not in "
        f"the Hugging Face cache ({where}; the cache is $HF_HUB_CACHE, $HF_HOME/hub or "
        f"~/.cache/huggingface/hub). zephon never downloads: fetch it where there is "
        f"network (`huggingface-cli download {tokenizer_id} tokenizer.json "
        f"tokenizer_config.json`) into that cache, or pass the tokenizer's path",
        errors.NOT_FOUND)


def _byte_level_alphabet() -> list[str]:
    """GPT-2's printable stand-ins for the 256 byte values (the ByteLevel alphabet)."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
                 + list(range(ord("®"), ord("ÿ") + 1)))
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def fallback_tokenizer_json() -> bytes:
    """A byte-level tokenizer.json: ids 0-2 are <pad>, <s>, </s>; byte b is id 3 + b. Every
    text encodes (one token per UTF-8 byte), so it needs no files: upstream's tests use
    its "__fallback__" this way. Its ids are not upstream's fallback's."""
    specials = ["<pad>", "<s>", "</s>"]
    vocab = {tok: i for i, tok in enumerate(specials)}
    for b, ch in enumerate(_byte_level_alphabet()):
        vocab[ch] = len(specials) + b
    added = [{"id": i, "content": tok, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, tok in enumerate(specials)]
    doc: dict[str, Any] = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "vocab": vocab, "merges": []},
    }
    return json.dumps(doc, ensure_ascii=False).encode("utf-8")


class _Fallback:
    """The fallback as an object tokenize() accepts (to_str(), bos/eos names)."""
    bos_token = "<s>"
    eos_token = "</s>"
    pad_token = "<pad>"

    def to_str(self) -> str:
        return fallback_tokenizer_json().decode("utf-8")


def fallback_tokenizer() -> _Fallback:
    return _Fallback()
