"""CacheOptions and StoreOptions as upstream spells them (``zephon.io``).

Values are checked (types, sizes such as ``"500gb"``) so a recipe with a typo fails where
it is written; zephond's node-wide caches are configured on the daemon, so the values
themselves change nothing here (README, "Coming from the Python Zephon").
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any, Mapping, TypeVar

_T = TypeVar("_T")

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?i?b?)?\s*$", re.I)
_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1 << 10, "m": 1000**2, "mb": 1000**2,
          "mib": 1 << 20, "g": 1000**3, "gb": 1000**3, "gib": 1 << 30, "t": 1000**4,
          "tb": 1000**4, "tib": 1 << 40, "p": 1000**5, "pb": 1000**5, "pib": 1 << 50}


def parse_size_bytes(value: int | str | None, what: str) -> int | None:
    """An int, None, or a size string ("500gb", "2 GiB", "1048576") as bytes."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an int or a size string, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"{what}={value} must be >= 0")
        return value
    if isinstance(value, str):
        m = _SIZE.match(value)
        if m and (m.group(2) or "").lower() in _UNITS:
            return int(float(m.group(1)) * _UNITS[(m.group(2) or "").lower()])
        raise ValueError(f"{what}={value!r} is not a size (e.g. 500gb, 2GiB, 1048576)")
    raise TypeError(f"{what} must be an int or a size string, got {type(value).__name__}")


def _from_mapping(cls: type[_T], value: Mapping[str, Any]) -> _T:
    """`cls` (a dataclass) from a dict of its field names; unknown keys raise TypeError
    naming them and the fields."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(value) - known)
    if unknown:
        raise TypeError(f"{cls.__name__} has no field(s) {unknown}; fields: "
                        f"{', '.join(sorted(known))}")
    return cls(**dict(value))


@dataclasses.dataclass(frozen=True)
class CacheOptions:
    """Upstream's local shard cache options (names and defaults as upstream's)."""
    enabled: bool = False
    root: str | None = None
    limit_bytes: int | None = None
    rg_cache_bytes: int | None = None
    keep_zip: bool = False
    validate_hash: bool = False
    download_retry: int = 12
    download_timeout: float = 180.0
    open_retry_attempts: int = 5
    open_retry_initial_backoff: float = 0.5
    open_retry_max_backoff: float = 8.0
    min_slack_bytes: int | None = None
    max_slack_bytes: int | None = None

    def __post_init__(self) -> None:
        for name in ("limit_bytes", "rg_cache_bytes", "min_slack_bytes", "max_slack_bytes"):
            object.__setattr__(self, name,
                               parse_size_bytes(getattr(self, name), f"CacheOptions.{name}"))

    @classmethod
    def from_any(cls, value: "CacheOptions | Mapping[str, Any] | bool | None") -> "CacheOptions":
        """None/False -> disabled; True -> enabled defaults; a dict of field names (sizes
        may be strings); a CacheOptions as is. Unknown keys raise TypeError naming them."""
        if value is None or value is False:
            return cls()
        if value is True:
            return cls(enabled=True)
        if isinstance(value, cls):
            return value
        if isinstance(value, Mapping):
            return _from_mapping(cls, value)
        raise TypeError(f"CacheOptions.from_any takes None, a bool, a dict or CacheOptions, "
                        f"got {type(value).__name__}")


@dataclasses.dataclass(frozen=True)
class StoreOptions:
    """Upstream's store options: the shard cache and format-specific read knobs."""
    cache: CacheOptions = dataclasses.field(default_factory=CacheOptions)
    parquet_rg_cache: int | None = None
    vortex_read_concurrency: int | None = None
    vortex_segment_cache_bytes: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "cache", CacheOptions.from_any(self.cache))

    @classmethod
    def from_any(cls, value: "StoreOptions | Mapping[str, Any] | None") -> "StoreOptions":
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, Mapping):
            return _from_mapping(cls, value)
        raise TypeError(f"StoreOptions.from_any takes None, a dict or StoreOptions, got "
                        f"{type(value).__name__}")
