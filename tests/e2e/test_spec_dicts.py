"""Every attach request the Python package can build, checked against the proto
descriptors (protoc-generated from proto/*.proto, tests/e2e/proto_modules.py): each key
must be a field of its message, each value of a compatible type, each enum value a
member. No field name is written here: everything is read from the descriptors, so the
check follows the .proto files. No daemon needed."""
from __future__ import annotations

import base64
import itertools
import json
import math

import pytest
from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor as FD

import zephon
from zephon import _spec_enums
from zephon import pipeline as pipeline_module
from zephon import sources as sources_module
import proto_modules
from test_tokenize_pipeline import tiny_tokenizer_json

# Values of the Python API's options whose target the daemon interprets (the Python
# package passes them on as written or translates them; either way each must land in a
# valid request). The enum options' values come from _spec_enums, checked below.
API_VALUES = {"mapping_strategy": list(_spec_enums.CHOICES["mapping_strategy"]),
              "lane_routing": list(_spec_enums.CHOICES["lane_routing"]),
              "flush_every_k_chunks": [8]}

_INTS = {FD.TYPE_INT32, FD.TYPE_INT64, FD.TYPE_UINT32, FD.TYPE_UINT64, FD.TYPE_SINT32,
         FD.TYPE_SINT64, FD.TYPE_FIXED32, FD.TYPE_FIXED64, FD.TYPE_SFIXED32,
         FD.TYPE_SFIXED64}
_UNSIGNED = {FD.TYPE_UINT32, FD.TYPE_UINT64, FD.TYPE_FIXED32, FD.TYPE_FIXED64}


def attach_request_descriptor():
    return proto_modules.load().zephon.AttachRequest.DESCRIPTOR


def check_value(field, value, path: str) -> list[str]:
    t = field.type
    if t == FD.TYPE_MESSAGE:
        if not isinstance(value, dict):
            return [f"{path}: {field.message_type.name} must be an object, got {value!r}"]
        return check_message(value, field.message_type, path)
    if t == FD.TYPE_ENUM:
        names = [v.name for v in field.enum_type.values]
        if value not in names:
            return [f"{path}: {value!r} is not a value of enum {field.enum_type.full_name} "
                    f"({', '.join(names)})"]
        return []
    if t in _INTS:
        # proto JSON: numbers, or decimal strings (how 64-bit ints travel).
        number = value
        if isinstance(value, str) and value.lstrip("-").isdigit():
            number = int(value)
        if isinstance(number, bool) or not isinstance(number, int):
            return [f"{path}: {field.name} is an integer field, got {value!r}"]
        if t in _UNSIGNED and number < 0:
            return [f"{path}: {field.name} is unsigned, got {value!r}"]
        return []
    if t in (FD.TYPE_DOUBLE, FD.TYPE_FLOAT):
        ok = (not isinstance(value, bool) and isinstance(value, (int, float))
              and math.isfinite(value))
        return [] if ok else [f"{path}: {field.name} is a finite number field, got {value!r}"]
    if t == FD.TYPE_BOOL:
        return [] if isinstance(value, bool) else [f"{path}: {field.name} is a bool, got "
                                                   f"{value!r}"]
    if t == FD.TYPE_STRING:
        return [] if isinstance(value, str) else [f"{path}: {field.name} is a string, got "
                                                  f"{value!r}"]
    if t == FD.TYPE_BYTES:
        try:
            base64.b64decode(value, validate=True)
            return []
        except (TypeError, ValueError):
            return [f"{path}: {field.name} is bytes (base64 in JSON), got {value!r}"]
    return [f"{path}: field type {t} of {field.name} is not handled by this test"]


def check_message(obj: dict, descriptor, path: str) -> list[str]:
    problems = []
    for key, value in obj.items():
        where = f"{path}.{key}" if path else key
        field = descriptor.fields_by_name.get(key)
        if field is None:
            problems.append(f"{where}: {descriptor.full_name} has no field {key!r} (fields: "
                            f"{', '.join(descriptor.fields_by_name)})")
            continue
        if field.label == FD.LABEL_REPEATED:
            if not isinstance(value, list):
                problems.append(f"{where}: repeated field, got {value!r}")
                continue
            for i, item in enumerate(value):
                problems += check_value(field, item, f"{where}[{i}]")
        else:
            problems += check_value(field, value, where)
    return problems


def fields_by_name_anywhere(descriptor, seen=None) -> dict:
    """{field name: field} of every message reachable from `descriptor`."""
    seen = set() if seen is None else seen
    if descriptor.full_name in seen:
        return {}
    seen.add(descriptor.full_name)
    out = {}
    for field in descriptor.fields:
        out.setdefault(field.name, field)
        if field.message_type is not None:
            for name, f in fields_by_name_anywhere(field.message_type, seen).items():
                out.setdefault(name, f)
    return out


def probe_values(option: str) -> list:
    """Values to try for a Pipeline option: the API's own values where they are named
    strings, else one value of the type of the proto field of the same name."""
    if option in API_VALUES:
        return API_VALUES[option]
    field = fields_by_name_anywhere(attach_request_descriptor()).get(option)
    if field is None:
        pytest.fail(f"Pipeline option {option!r} has no proto field of that name: add its "
                    "values to API_VALUES in this test")
    if field.type in _INTS:
        return [2]
    if field.type in (FD.TYPE_DOUBLE, FD.TYPE_FLOAT):
        return [1.5]
    if field.type == FD.TYPE_BOOL:
        return [True, False]
    if field.type == FD.TYPE_STRING:
        return ["probe-value"]
    pytest.fail(f"Pipeline option {option!r}: no probe value for proto field type "
                f"{field.type}; add its values to API_VALUES in this test")


def datasets() -> list[zephon.Dataset]:
    out = [zephon.Dataset("auto", "/data/auto"),
           zephon.Dataset("s3", "s3://bucket/prefix", max_repeats=0),
           zephon.Dataset("flat16", "/data/flat", fmt="flat", dtype="uint16", sample_tokens=64),
           zephon.Dataset("flat32", "/data/flat", fmt="flat", dtype="uint32", sample_tokens=64,
                          max_repeats=3),
           zephon.Dataset("lines", "/data/jsonl", fmt="jsonl", field="ids"),
           zephon.Dataset("pq", "/data/pq/*.parquet", fmt="parquet", field="meta.input_ids"),
           zephon.Dataset("auto-null", "/data/pq", on_null="error")]
    for on_null in _spec_enums.CHOICES["on_null"]:
        out.append(zephon.Dataset(f"mds-{on_null}", "/data/mds", fmt="mds", field="tokens",
                                  on_null=on_null))
    for fmt in sources_module._FORMATS:
        out.append(zephon.Dataset(f"every-{fmt}", f"/data/{fmt}", fmt=fmt))
    return out


def work_sources() -> list[zephon.StaticMixtureWorkSource]:
    ds = datasets()
    out = []
    for policy, block in itertools.product(_spec_enums.CHOICES["exhausted_policy"],
                                           [None, 4096, "auto", "global"]):
        out.append(zephon.StaticMixtureWorkSource(ds, seed=7, chunk_size=32,
                                                  shuffle_block_size=block,
                                                  exhausted_policy=policy))
    out.append(zephon.StaticMixtureWorkSource(
        ds, mixture={d.name: i + 1.5 for i, d in enumerate(ds)}, shuffle_shards=False,
        shuffle_within_shard=True, stop_after_passes=3, max_repeats={"auto": 2}))
    out.append(zephon.StaticMixtureWorkSource(ds[:2], mixture=[1, 2.5], max_repeats=4))
    for weight_by in _spec_enums.CHOICES["weight_by"]:
        out.append(zephon.StaticMixtureWorkSource(ds, weight_by=weight_by))
    out.extend(mixture_control_work_sources(ds))
    return out


def mixture_control_work_sources(ds) -> list[zephon.StaticMixtureWorkSource]:
    """Per-dataset repetition maps and curricula (ScheduledMixtureWorkSource)."""
    names = [d.name for d in ds]
    out = [zephon.StaticMixtureWorkSource(
        ds, exhausted_policy={names[0]: "repeat", names[1]: "stop"},
        stop_after_passes={names[2]: 3}, max_repeats={names[0]: 2},
        reshuffle_on_repeat={names[0]: False})]
    out.append(zephon.StaticMixtureWorkSource(ds, exhausted_policy="repeat",
                                              reshuffle_on_repeat=False))
    for interpolate, unit in itertools.product(_spec_enums.CHOICES["interpolate"],
                                               ["samples", "chunks"]):
        out.append(zephon.ScheduledMixtureWorkSource(
            ds, schedule=[(0, {names[0]: 3, names[1]: 1}), (4096, [1] * len(ds))],
            interpolate=interpolate, unit=unit, chunk_size=64))
    return out


def pipelines() -> list[tuple[str, zephon.Pipeline]]:
    """(label, Pipeline) covering every builder, every argument and every option."""
    out = []
    for i, ws in enumerate(work_sources()):
        out.append((f"work source {i}", zephon.Pipeline(ws).pack_flat(129).batch(2)))
    ws = work_sources()[0]
    for emit, drop in itertools.product([True, False], [True, False]):
        out.append((f"emit_positions={emit} drop_last={drop}",
                    zephon.Pipeline(ws).shuffle(100, seed=3)
                    .pack_flat(65, emit_positions=emit).batch(4, drop_last=drop)))
    class Inline:  # a tokenizers object: its JSON goes inline
        def to_str(self):
            return tiny_tokenizer_json()

    for source, kwargs in itertools.product(
            ["s3://bucket/models/tok.json", Inline()],
            [{}, {"split_long_samples": True, "max_length": 64},
             {"field": "body", "special_tokens": "eos", "bos_token_id": 1, "eos_token_id": 2,
              "max_length": 64, "truncation": True, "on_missing": "skip",
              "split_special_tokens": True}]
            + [{"special_tokens": v} for v in _spec_enums.CHOICES["special_tokens"]]):
        out.append((f"tokenize {type(source).__name__} {kwargs}",
                    zephon.Pipeline(ws).tokenize(source, **kwargs).pack_flat(65).batch(2)))
    def base():  # builders change the Pipeline they are called on: one per case
        return zephon.Pipeline(ws).pack_flat(129).batch(2)

    options = sorted(pipeline_module._ALL_OPTIONS - pipeline_module._CLIENT_OPTIONS)
    for option in options:
        for value in probe_values(option):
            out.append((f"option {option}={value!r}", base().options(**{option: value})))
    out.append(("every option", base().options(**{o: probe_values(o)[0] for o in options})))
    restored = base()
    # The request's encoding of restore bytes (restore() itself refuses non-checkpoints).
    restored._restore = b"\x00checkpoint bytes\xff"
    out.append(("restore", restored))
    return out


def test_every_request_matches_the_proto_descriptors():
    problems = []
    for label, pipe in pipelines():
        request = pipe._request()
        problems += [f"{label}: {p}"
                     for p in check_message(request, attach_request_descriptor(), "")]
        # The proto JSON parser (what the C ABI uses) agrees: it refuses unknown fields too.
        try:
            json_format.Parse(json.dumps(request), proto_modules.load().zephon.AttachRequest())
        except json_format.ParseError as e:
            problems.append(f"{label}: proto JSON parser: {e}")
    assert not problems, "\n".join(problems)


def test_every_option_reaches_the_request():
    def base():  # builders change the Pipeline they are called on: one per case
        return zephon.Pipeline(work_sources()[0]).pack_flat(129).batch(2)

    baseline = base()._request()
    for option in sorted(pipeline_module._ALL_OPTIONS - pipeline_module._CLIENT_OPTIONS):
        for value in probe_values(option):
            assert base().options(**{option: value})._request() != baseline, (
                f"Pipeline option {option}={value!r} left the attach request unchanged")


def test_the_checker_refuses_what_the_proto_lacks():
    # The checks above are only as good as the walker: it must name an unknown key, a
    # wrongly typed value and a foreign enum value.
    request = zephon.Pipeline(work_sources()[0]).pack_flat(129).batch(2)._request()
    descriptor = attach_request_descriptor()
    assert check_message(dict(request, no_such_field=1), descriptor, "")[0].startswith(
        "no_such_field: zephon.proto.AttachRequest has no field 'no_such_field'")
    spec_field = next(iter(request["spec"]["work_source"]))  # any key, read from the request
    broken = json.loads(json.dumps(request))
    broken["spec"]["work_source"][spec_field] = {"not": "a scalar"}
    assert any(p.startswith(f"spec.work_source.{spec_field}")
               for p in check_message(broken, descriptor, ""))
    enums = [f for f in fields_by_name_anywhere(descriptor).values()
             if f.type == FD.TYPE_ENUM]
    for field in enums:
        assert check_value(field, "NOT_A_MEMBER", "x")[0].startswith(
            "x: 'NOT_A_MEMBER' is not a value of enum")
    assert check_value(next(f for f in descriptor.fields if f.type in _UNSIGNED), -1, "x")


def test_enum_option_values_are_the_proto_enums_in_lower_case():
    # The one translation table of the Python package: every value of every enum option
    # the proto declares (but *_UNSPECIFIED), in order, and nothing else.
    descriptor = attach_request_descriptor()
    fields = fields_by_name_anywhere(descriptor)
    for option, choices in _spec_enums.CHOICES.items():
        field = fields[option]
        assert field.type == FD.TYPE_ENUM, f"{option} is not an enum in the proto"
        names = [v.name.lower() for v in field.enum_type.values if v.number != 0]
        assert list(choices) == names, (option, choices, names)
        for value in choices:
            assert _spec_enums.to_proto(option, value) in field.enum_type.values_by_name


def test_an_unknown_enum_value_is_refused_in_python_naming_the_choices():
    ws = work_sources()[0]
    with pytest.raises(ValueError, match=r"mapping_strategy='diagonal' is not supported; use "
                                         r"one of contiguous, interleaved"):
        zephon.Pipeline(ws).options(mapping_strategy="diagonal")
    with pytest.raises(ValueError, match=r"lane_routing='MODULO' is not supported"):
        zephon.Pipeline(ws).options(lane_routing="MODULO")
    with pytest.raises(ValueError, match=r"exhausted_policy='forever' is not supported; use "
                                         r"one of stop_after_passes, repeat, stop"):
        zephon.StaticMixtureWorkSource(datasets(), exhausted_policy="forever")
    with pytest.raises(ValueError, match=r"weight_by='bytes' is not supported; use one of "
                                         r"samples, tokens"):
        zephon.StaticMixtureWorkSource(datasets(), weight_by="bytes")
