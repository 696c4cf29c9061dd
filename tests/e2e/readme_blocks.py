"""The README's ```python blocks, and running one as a user would: a fresh interpreter
whose client autostarts its own zephond."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

from zephond_process import autostart_env

README = Path(__file__).resolve().parents[2] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def run_readme_block(marker: str, tmp_path: Path) -> str:
    """Runs the one README python block containing `marker` (asserting there is exactly
    one, and that it exits 0) and returns its stdout."""
    blocks = [b for b in python_blocks() if marker in b]
    assert len(blocks) == 1, f"README has {len(blocks)} python blocks containing {marker!r}"
    env = autostart_env(str(tmp_path / "zephond.sock"), idle_exit_s=1)
    out = subprocess.run(["/usr/bin/python3", "-c", blocks[0]], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout
