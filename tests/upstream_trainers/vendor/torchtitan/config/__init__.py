"""Stub (ours) of torchtitan.config: ``override`` and ``derive``.

- ``override(target=, fqns=, exact=, description=)`` is a decorator factory registering a
  function that turns a ``target`` config into another config type; here it records the
  registration in ``OVERRIDES`` and returns the function unchanged.
- ``derive(config, new_cls, **deltas)`` builds ``new_cls`` from the fields ``config``
  shares with it, then applies ``deltas``."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

OVERRIDES: list[dict[str, Any]] = []


def override(*, target: type, fqns: list[str], exact: bool = False,
             description: str = "") -> Callable:
    def register(fn: Callable) -> Callable:
        OVERRIDES.append(dict(fn=fn, target=target, fqns=list(fqns), exact=exact,
                              description=description))
        return fn
    return register


def derive(config: Any, new_cls: type, **deltas: Any) -> Any:
    names = {f.name for f in dataclasses.fields(new_cls) if f.init}
    shared = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)
              if f.name in names}
    shared.update(deltas)
    return new_cls(**shared)
