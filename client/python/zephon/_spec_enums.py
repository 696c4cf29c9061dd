"""The spec's enum options (proto/spec.proto) and the one place that translates them.

The Python API names each value in lower case (``mapping_strategy="interleaved"``); the
attach request carries the proto enum value name (``INTERLEAVED``): the lower-case name
upper-cased. zephond shows the lower-case names in errors and ``explain``, and the spec
hash covers them (daemon/pipeline/spec_string_form.h). tests/e2e/test_spec_dicts.py
checks CHOICES against the proto descriptors."""
from __future__ import annotations

# option -> its values, in the proto enum's order (the first is zephond's default).
CHOICES: dict[str, tuple[str, ...]] = {
    "mapping_strategy": ("contiguous", "interleaved"),
    "lane_routing": ("permute", "modulo"),
    "exhausted_policy": ("stop_after_passes", "repeat", "stop"),
    "weight_by": ("samples", "tokens"),
    # ScheduledMixtureWorkSource's (WorkSourceSpec.interpolate).
    "interpolate": ("step", "linear"),
    # Pipeline.tokenize's (TokenizeSpec's).
    "special_tokens": ("bos_eos", "bos", "eos", "none", "tokenizer_default"),
    "on_missing": ("error", "skip"),
    # Dataset's (DatasetSpec's), for record formats.
    "on_null": ("skip", "error"),
    # Dataset's loss_mask_format (DatasetSpec's), for SFT masks.
    "loss_mask_format": ("values", "spans"),
}


def check(option: str, value: object) -> str:
    """``value`` if it is one of ``option``'s values; ValueError naming them otherwise."""
    choices = CHOICES[option]
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{option}={value!r} is not supported; use one of "
                         f"{', '.join(choices)}")
    return value


def to_proto(option: str, value: object) -> str:
    """The proto enum value name for ``value`` of ``option`` (checked)."""
    return check(option, value).upper()
