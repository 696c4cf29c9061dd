"""Pipeline.tokenize's argument checks and its operator in the attach request
(proto/spec.proto, TokenizeSpec).

The tokenizer travels as a location (an absolute local path or an s3:// URL, read by
zephond) or as the tokenizer.json text of an object (inline bytes). When this process can
load it (zephon.Tokenizer: the same C++ code as the daemon), the request also carries its
fingerprint, and zephond refuses a tokenizer whose own load differs: a rank on a node with
other files fails at attach instead of reading other ids."""
from __future__ import annotations

import base64
import os
from typing import Any, Optional

from . import _spec_enums, errors
from .tokenizer import Tokenizer, _tokenizer_json_of


def _invalid(message: str) -> errors.InvalidOptionError:
    return errors.InvalidOptionError(f"Pipeline.tokenize: {message}", errors.INVALID_ARGUMENT)


def _token_id(name: str, value: Any) -> Optional[int]:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                              or not 0 <= value < 2**31):
        raise _invalid(f"{name} must be a token id (an int >= 0) or None, not {value!r}")
    return value


def _bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _invalid(f"{name} must be True or False, not {value!r}")
    return value


def _source(tokenizer: Any, options: dict[str, Any]) -> tuple[dict[str, Any], Tokenizer | None]:
    """(the request's source fields, a zephon.Tokenizer of it with `options` or None when
    this process cannot load it: an s3:// URL, or a path only the daemon's node holds)."""
    if isinstance(tokenizer, Tokenizer):
        if all(tokenizer._options[k] == v for k, v in options.items()):
            return tokenizer._spec_source, tokenizer
        source = tokenizer._spec_source
        if "tokenizer_path" in source:
            return source, Tokenizer(source["tokenizer_path"], **options)
        # Rebuilt from its bytes with the options this pipeline asks for.
        return source, _reload_json(source, options)
    if isinstance(tokenizer, (str, os.PathLike)):
        path = os.fspath(tokenizer)
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not path:
            raise _invalid("tokenizer is an empty path")
        if path.startswith("s3:/") and not path.startswith("s3://"):
            path = "s3://" + path[len("s3:/"):]  # pathlib turns "s3://b/k" into "s3:/b/k"
        if path.startswith("s3://"):
            return {"tokenizer_path": path}, None
        if "://" in path:
            raise _invalid(f"tokenizer {path!r}: only local paths and s3:// URLs are "
                           "supported")
        path = os.path.abspath(path)  # zephond does not share this process's cwd
        try:
            return {"tokenizer_path": path}, Tokenizer(path, **options)
        except (errors.ZephonError, OSError):
            # Not loadable here (e.g. a path on the daemon's node only): zephond loads
            # it and reports its errors at attach.
            return {"tokenizer_path": path}, None
    try:
        data, config = _tokenizer_json_of(tokenizer)
    except TypeError:
        raise TypeError(
            f"Pipeline.tokenize: tokenizer must be a path (str or os.PathLike: a "
            f"tokenizer.json, an HF model directory or a SentencePiece .model), an s3:// URL, "
            f"a zephon.Tokenizer, or an object with to_str() / backend_tokenizer.to_str() (a "
            f"tokenizers or transformers tokenizer), not {type(tokenizer).__name__}") from None
    source = {"tokenizer_json": data, "tokenizer_config_json": config}
    return source, _reload_json(source, options)


class _JsonSource:
    """An object whose to_str() is given tokenizer.json text (and bos/eos names)."""

    def __init__(self, data: bytes, config: bytes | None) -> None:
        self._data = data
        if config:
            import json
            for key, value in json.loads(config).items():
                setattr(self, key, value)

    def to_str(self) -> str:
        return self._data.decode("utf-8")


def _reload_json(source: dict[str, Any], options: dict[str, Any]) -> Tokenizer:
    return Tokenizer(_JsonSource(source["tokenizer_json"], source["tokenizer_config_json"]),
                     **options)


def _fields(field: Any, loss_on: Any) -> tuple[list[str] | None, list[str] | None]:
    """(fields, loss_on) for a list ``field`` (prompt/completion), (None, None) for one
    field; checked: loss_on a subset of the fields, at least one trained on."""
    if isinstance(field, str):
        if loss_on is not None:
            raise _invalid(f"loss_on={loss_on!r} needs field to be a list of fields (e.g. "
                           "field=[\"prompt\", \"completion\"], loss_on=[\"completion\"])")
        return None, None
    if (not isinstance(field, (list, tuple)) or not field
            or not all(isinstance(f, str) and f for f in field)):
        raise _invalid(f"field must be a non-empty str or a non-empty list of non-empty str "
                       f"(the records' text fields, concatenated in order), not {field!r}")
    if len(set(field)) != len(field):
        raise _invalid(f"field={list(field)!r} names a field twice")
    if loss_on is None:
        return list(field), None
    if isinstance(loss_on, str) or not isinstance(loss_on, (list, tuple)) or not loss_on:
        raise _invalid(f"loss_on must be a non-empty list of fields of field={list(field)!r} "
                       f"(the fields trained on), not {loss_on!r}")
    unknown = [f for f in loss_on if f not in field]
    if unknown:
        raise _invalid(f"loss_on names {unknown!r}, which are not in field={list(field)!r}")
    if len(set(loss_on)) != len(loss_on):
        raise _invalid(f"loss_on={list(loss_on)!r} names a field twice")
    return list(field), list(loss_on)


def tokenize_operator(tokenizer: Any, *, field: Any, special_tokens: Any,
                      bos_token_id: Any, eos_token_id: Any, max_length: Any, truncation: Any,
                      split_long_samples: Any, on_missing: Any, split_special_tokens: Any,
                      loss_on: Any = None) -> dict[str, Any]:
    """The {"tokenize": {...}} operator of the attach request, every argument checked
    (InvalidOptionError, a ValueError, naming the argument and the accepted values)."""
    fields, loss_on = _fields(field, loss_on)
    if fields is None and (not isinstance(field, str) or not field):
        raise _invalid(f"field must be a non-empty str (the records' text field or column), not "
                       f"{field!r}")
    if fields is not None and len(fields) > 1 and special_tokens == "tokenizer_default":
        raise _invalid("special_tokens='tokenizer_default' cannot be split across several "
                       "fields; use 'bos_eos', 'bos', 'eos' or 'none'")
    for name, value in (("special_tokens", special_tokens), ("on_missing", on_missing)):
        try:
            _spec_enums.check(name, value)
        except ValueError as e:
            raise _invalid(str(e)) from None
    _token_id("bos_token_id", bos_token_id)
    _token_id("eos_token_id", eos_token_id)
    _bool("truncation", truncation)
    _bool("split_long_samples", split_long_samples)
    _bool("split_special_tokens", split_special_tokens)
    if max_length is not None and (isinstance(max_length, bool) or not isinstance(max_length, int)
                                   or max_length < 1):
        raise _invalid(f"max_length must be an int >= 1 or None, not {max_length!r}")
    if truncation and split_long_samples:
        raise _invalid("truncation=True and split_long_samples=True: choose one (truncation "
                       "drops the tokens past max_length, split_long_samples makes more "
                       "samples of them)")
    if (truncation or split_long_samples) and max_length is None:
        which = "truncation" if truncation else "split_long_samples"
        raise _invalid(f"{which}=True needs max_length (the longest sample in tokens)")
    if max_length is not None and not (truncation or split_long_samples):
        raise _invalid(f"max_length={max_length} without truncation=True or "
                       "split_long_samples=True changes nothing; set one of them, or leave "
                       "max_length=None")
    if isinstance(tokenizer, Tokenizer):
        # Its own options are the defaults: tokenize(zephon.Tokenizer(p, bos_token_id=1))
        # encodes as that object does.
        own = tokenizer._options
        bos_token_id = own["bos_token_id"] if bos_token_id is None else bos_token_id
        eos_token_id = own["eos_token_id"] if eos_token_id is None else eos_token_id
        split_special_tokens = split_special_tokens or own["split_special_tokens"]
    options = {"split_special_tokens": split_special_tokens, "bos_token_id": bos_token_id,
               "eos_token_id": eos_token_id}
    source, loaded = _source(tokenizer, options)
    op: dict[str, Any] = {}
    if "tokenizer_path" in source:
        op["tokenizer_path"] = source["tokenizer_path"]
    else:
        op["tokenizer_json"] = base64.b64encode(source["tokenizer_json"]).decode("ascii")
        if source["tokenizer_config_json"]:
            op["tokenizer_config_json"] = base64.b64encode(
                source["tokenizer_config_json"]).decode("ascii")
    if loaded is not None:
        op["fingerprint"] = loaded.fingerprint
    if fields is None:
        op["field"] = field
    elif len(fields) == 1 and loss_on is None:
        op["field"] = fields[0]  # one spelling, one spec hash
    else:
        op["fields"] = fields
        if loss_on is not None:
            op["loss_on"] = loss_on
    op["special_tokens"] = _spec_enums.to_proto("special_tokens", special_tokens)
    op["on_missing"] = _spec_enums.to_proto("on_missing", on_missing)
    if bos_token_id is not None:
        op["bos_token_id"] = bos_token_id
    if eos_token_id is not None:
        op["eos_token_id"] = eos_token_id
    if max_length is not None:
        op["max_length"] = str(max_length)
    op["truncation"] = truncation
    op["split_long_samples"] = split_long_samples
    op["split_special_tokens"] = split_special_tokens
    return {"tokenize": op}
