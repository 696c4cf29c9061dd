"""deploy/prometheus/zephon-rules.yaml: promtool accepts it, and every alert it defines
has unit tests (tests/ops/rules_test.yaml) that pass: each fires on the synthetic series
that should page and stays quiet on their look-alikes."""
from __future__ import annotations

import os
import re
import subprocess

from conftest import HERE, RULES

RULES_TEST = os.path.join(HERE, "rules_test.yaml")


def _alerts(path: str) -> set[str]:
    return set(re.findall(r"^\s*-?\s*alert(?:name)?:\s*(\w+)\s*$", open(path).read(), re.M))


def test_promtool_checks_the_rules_file(promtool):
    out = subprocess.run([promtool, "check", "rules", RULES], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS: 10 rules found" in out.stdout, out.stdout


def test_every_alert_has_a_unit_test():
    defined = _alerts(RULES)
    assert defined == {
        "ZephonRankLagging", "ZephonProducerStalled", "ZephonCheckpointRoundFailed",
        "ZephonDaemonRestarted", "ZephonDaemonDown", "ZephonShmNearlyFull",
        "ZephonTokenCacheOverBudget", "ZephonShardCacheNearlyFull", "ZephonS3Errors",
        "ZephonS3Retrying"}
    assert _alerts(RULES_TEST) == defined


def test_the_rules_unit_tests_pass(promtool):
    out = subprocess.run([promtool, "test", "rules", RULES_TEST], capture_output=True,
                         text=True, cwd=HERE)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout, out.stdout


def test_a_broken_expectation_fails(promtool, tmp_path):
    """The unit tests can fail: the same file expecting the wrong rank does."""
    text = open(RULES_TEST).read()
    broken = text.replace('rank: "1"', 'rank: "0"', 1)
    assert broken != text
    path = tmp_path / "broken_test.yaml"
    path.write_text(broken.replace("../../deploy/prometheus/zephon-rules.yaml", RULES))
    out = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True,
                         text=True)
    assert out.returncode != 0, out.stdout
    assert "ZephonRankLagging" in out.stdout + out.stderr
