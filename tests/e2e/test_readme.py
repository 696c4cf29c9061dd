"""The README's Python example runs as written."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

from zephond_process import autostart_env

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_python_example_runs(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks, "README has no python example"
    env = autostart_env(str(tmp_path / "zephond.sock"), idle_exit_s=1)
    out = subprocess.run(["/usr/bin/python3", "-c", blocks[0]], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("0 ") and "(4, 129)" in lines[0]
    assert "node totals" in out.stdout


def test_readme_checkpoint_example_runs(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) >= 2, "README has no checkpoint example"
    env = autostart_env(str(tmp_path / "zephond.sock"), idle_exit_s=1)
    out = subprocess.run(["/usr/bin/python3", "-c", blocks[1]], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "resumed exactly" in out.stdout


def test_every_readme_python_block_compiles():
    # Blocks past the two runnable examples are fragments (an S3 store, a 64-rank job):
    # they must at least be valid Python.
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    for i, block in enumerate(blocks):
        compile(block, f"README.md python block {i}", "exec")
