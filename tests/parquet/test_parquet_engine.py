"""A Parquet dataset (DuckDB-written, write_pipeline_files.mjs) keeps the engine's
guarantees through real zephond processes (tests/e2e/engine_checks.py): the same samples
per global step for dp_degree 1, 2 and 4; a checkpoint on dp_degree 2 restored on 1 and
4; TP peers given byte-identical batches; a restore refused when the field or a file
changed.

Needs `make setup-parquet` (DuckDB through npm); skips saying so otherwise."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "e2e"))
sys.path.insert(0, str(HERE.parents[1] / "client" / "python"))

import zephon  # noqa: E402
import engine_checks  # noqa: E402
from test_checkpoint import nodes  # noqa: E402,F401  (the daemons fixture)
from test_parquet_pipeline import data  # noqa: E402,F401  (DuckDB-written files)


def tokens(folder: Path, field: str = "input_ids") -> zephon.Dataset:
    return zephon.Dataset.from_path("pq", str(folder), fmt="parquet", field=field)


def test_steps_hold_the_same_samples_for_dp_1_2_and_4(data, nodes, tmp_path):
    engine_checks.check_steps_equal_across_dp(tokens(data / "tokens"), nodes, tmp_path / "agg")


def test_checkpoint_on_dp_2_resumes_on_dp_1_and_4(data, nodes, tmp_path):
    engine_checks.check_resume_across_dp(tokens(data / "tokens"), nodes, tmp_path / "agg")


def test_tp_peers_get_byte_identical_batches(data, nodes, tmp_path):
    engine_checks.check_peers_byte_identical(tokens(data / "tokens"), nodes, tmp_path / "agg")


def test_restore_with_another_field_is_refused_by_the_spec_hash(data, nodes, tmp_path):
    # ids64 holds the same token lists as input_ids: only the spec differs.
    agg = tmp_path / "agg"
    (d,) = nodes(1)
    state = engine_checks.checkpoint_of(tokens(data / "tokens"), d, agg, "field")
    engine_checks.check_restore_refused(tokens(data / "tokens", "ids64"), state, d, agg,
                                        "field", r"spec hash .* differs from the checkpoint's")


def test_restore_after_a_file_was_rewritten_is_refused_naming_it(data, nodes, tmp_path):
    folder = tmp_path / "tokens"
    shutil.copytree(data / "tokens", folder)
    agg = tmp_path / "agg"
    (d,) = nodes(1)
    state = engine_checks.checkpoint_of(tokens(folder), d, agg, "file")
    shutil.copyfile(data / "tokens-changed" / "part-1.parquet", folder / "part-1.parquet")
    engine_checks.check_restore_refused(
        tokens(folder), state, d, agg, "file",
        r"cannot restore: dataset 'pq' shard 1 \(part-1\.parquet\): .*changed")
