"""The multi-node checkpoint scenario of tests/e2e/test_checkpoint.py with an s3://
aggregate_dir on a local s3rver: several zephond processes (simulated nodes) find their
leader through the rendezvous object, the leader PUTs the merged checkpoint, an
independent client (@aws-sdk/client-s3) reads it back, zephonctl lists, inspects,
verifies and prunes it, and the run resumes on another topology from it. Then the
failures: bad credentials, a missing bucket, and a store that goes away mid-transfer
give clear errors and leave no partial checkpoint.
"""
import json
import os
import subprocess
import time

import pytest

from s3rver import BUCKET, CLIENT, REQUIRES_S3RVER, node
from fault_proxy import DROP_REQUEST, PASS, REFUSE, STALL, FaultProxy
from test_checkpoint import STEPS, Job, corpus, make_pipe, nodes, reference_steps  # noqa: F401
from zephond_process import zephonctl_path

pytestmark = REQUIRES_S3RVER

PREFIX = "runs/aggregate"
AGG = f"s3://{BUCKET}/{PREFIX}"


def ctl(*args, env=None):
    return subprocess.run([zephonctl_path(), *args], capture_output=True, text=True, timeout=60,
                          env=env)


def s3_get(key, tmp_path):
    out = tmp_path / "got.bin"
    node("get", BUCKET, key, str(out))
    return out.read_bytes()


def s3_has(key):
    r = subprocess.run(["node", CLIENT, "head", BUCKET, key], capture_output=True, timeout=60)
    assert r.returncode in (0, 3), r.stderr.decode()
    return r.returncode == 0


def test_elastic_resume_with_an_s3_aggregate_dir(server, corpus, nodes, tmp_path):
    want = reference_steps(corpus, nodes, tmp_path / "reference-agg")

    daemons = nodes(3)
    job = Job(corpus, daemons, dp=4, peers=2, run_id="r1", agg=AGG)
    for s in range(3):
        assert job.step() == want[s], f"step {s}"
    states = job.checkpoint()
    assert all(s == states[0] for s in states), "every rank gets the same bytes"
    job.close()
    for d in daemons:
        assert d.stop() == 0

    # Read back by the independent client: the rendezvous object and the checkpoint.
    leader = s3_get(f"{PREFIX}/r1/leader", tmp_path).decode()
    assert leader.startswith("address=127.0.0.1:") and "\npid=" in leader
    assert s3_get(f"{PREFIX}/r1/checkpoint-00000000.zckpt", tmp_path) == states[0]
    assert node("list", BUCKET, f"{PREFIX}/r1/").split() == [
        f"{PREFIX}/r1/checkpoint-00000000.zckpt", f"{PREFIX}/r1/leader"]

    for dp, peers in ((2, 2), (8, 1)):
        fresh = nodes(2)
        resumed = Job(corpus, fresh, dp=dp, peers=peers, run_id="r1", agg=AGG,
                      restore=states[0])
        for s in range(3, STEPS):
            assert resumed.step() == want[s], f"dp={dp}: step {s}"
        resumed.close()


def test_zephonctl_reads_what_the_daemon_and_the_aws_sdk_wrote(server, corpus, nodes,
                                                              tmp_path):
    (d,) = nodes(1)
    job = Job(corpus, [d], dp=2, peers=1, run_id="ctl", agg=AGG)
    job.step()
    round0 = job.checkpoint()[0]
    job.step()
    round1 = job.checkpoint()[0]
    job.close()
    url = f"{AGG}/ctl/checkpoint-00000001.zckpt"

    # The other direction: objects the AWS SDK wrote, a damaged copy and a misplaced one.
    bad, moved = tmp_path / "bad.zckpt", tmp_path / "moved.zckpt"
    bad.write_bytes(round1[:-1] + bytes([round1[-1] ^ 0xFF]))
    moved.write_bytes(round0)
    node("put", BUCKET, f"{PREFIX}/ctl/checkpoint-00000002.zckpt", str(bad))
    node("put", BUCKET, f"{PREFIX}/ctl/checkpoint-00000003.zckpt", str(moved))
    # Not a canonical name: never listed as round 2, never pruned in its place.
    node("put", BUCKET, f"{PREFIX}/ctl/checkpoint-2.zckpt", str(moved))

    ls = ctl("checkpoint", "ls", AGG)
    assert ls.returncode == 0, ls.stderr
    assert "run ctl" in ls.stdout and "checkpoint-00000001.zckpt" in ls.stdout
    doc = json.loads(ctl("checkpoint", "ls", AGG, "--run", "ctl", "--json").stdout)
    (run,) = doc["runs"]
    assert run["leader"].startswith("127.0.0.1:") and run["leader_error"] == ""
    verdicts = {c["round"]: (c["ok"], c["verdict"]) for c in run["checkpoints"]}
    assert verdicts[0] == (True, "ok (checksum good)")
    assert verdicts[1] == (True, "ok (checksum good)")
    assert not verdicts[2][0] and "payload checksum mismatch" in verdicts[2][1], verdicts[2]
    assert verdicts[3] == (False, "misplaced: the file holds run ctl round 0")
    assert run["checkpoints"][1]["path"] == url
    assert run["checkpoints"][1]["size_bytes"] == len(round1)

    # --s3-endpoint instead of AWS_ENDPOINT_URL (here pointing nowhere: the flag wins).
    elsewhere = {**os.environ, "AWS_ENDPOINT_URL": "http://127.0.0.1:1"}
    by_flag = ctl("checkpoint", "ls", AGG, "--s3-endpoint", server.endpoint, "--s3-attempts",
                  "1", env=elsewhere)
    assert by_flag.returncode == 0 and "run ctl" in by_flag.stdout, by_flag.stderr
    refused = ctl("checkpoint", "ls", AGG, "--s3-attempts", "1", env=elsewhere)
    assert refused.returncode == 1 and "127.0.0.1:1" in refused.stderr, refused.stderr
    bad_flag = ctl("checkpoint", "ls", AGG, "--s3-endpoint", "ftp://x")
    assert bad_flag.returncode == 2 and "--s3-endpoint" in bad_flag.stderr

    inspect = ctl("checkpoint", "inspect", url, "--json")
    assert inspect.returncode == 0, inspect.stderr
    assert json.loads(inspect.stdout)["state"]["run_id"] == "ctl"
    verify = ctl("checkpoint", "verify", url, f"{AGG}/ctl/checkpoint-00000002.zckpt")
    assert verify.returncode == 1
    assert verify.stdout.splitlines()[0].startswith("OK")
    assert verify.stdout.splitlines()[1].startswith("BAD")
    missing = ctl("checkpoint", "inspect", f"{AGG}/ctl/checkpoint-00000009.zckpt")
    assert missing.returncode == 1 and "NoSuchKey" in missing.stderr

    # Prune counts only good checkpoints: round 1 is the newest good one and stays, the
    # damaged and misplaced newer ones stay for inspection, round 0 goes.
    pruned = ctl("checkpoint", "prune", AGG, "--run", "ctl", "--keep-last", "1")
    assert pruned.returncode == 0, pruned.stderr
    assert f"deleted {AGG}/ctl/checkpoint-00000000.zckpt" in pruned.stdout
    assert node("list", BUCKET, f"{PREFIX}/ctl/checkpoint-").split() == [
        f"{PREFIX}/ctl/checkpoint-0000000{r}.zckpt" for r in (1, 2, 3)] + [
        f"{PREFIX}/ctl/checkpoint-2.zckpt"]


def attach_error(corpus, daemon, agg):
    pipe = make_pipe(corpus, daemon.socket, world=2, rank=0, dp=2, group=0, run_id="fail",
                     agg=agg)
    try:
        with pytest.raises(Exception) as info:
            next(iter(pipe))
        return str(info.value)
    finally:
        pipe.close()


def test_bad_credentials_fail_the_leader_attach_naming_the_object(server, corpus, nodes,
                                                                 monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "NOT-S3RVER")
    (d,) = nodes(1)  # the daemon inherits the bad key
    err = attach_error(corpus, d, AGG)
    assert "HTTP 403" in err and "InvalidAccessKeyId" in err, err
    assert f"s3://{BUCKET}/{PREFIX}/fail/leader" in err, err


def test_daemon_s3_flags_beat_the_environment(server, corpus, tmp_path, monkeypatch):
    from zephond_process import Daemon
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")  # nothing listens there
    d = Daemon(tmp_path / "flagged", ["--s3-endpoint", server.endpoint, "--s3-attempts", "2"])
    try:
        pipe = make_pipe(corpus, d.socket, world=2, rank=0, dp=2, group=0, run_id="flags",
                         agg=AGG)
        next(iter(pipe))  # attached: the leader object went to --s3-endpoint
        pipe.close()
    finally:
        assert d.stop() == 0
    monkeypatch.setenv("AWS_ENDPOINT_URL", server.endpoint)
    assert s3_has(f"{PREFIX}/flags/leader")
    with pytest.raises(RuntimeError, match="s3-endpoint"):
        Daemon(tmp_path / "bad", ["--s3-endpoint", "s3.example.com"])


def test_missing_bucket_fails_the_leader_attach_naming_it(server, corpus, nodes):
    (d,) = nodes(1)
    err = attach_error(corpus, d, "s3://no-such-bucket-zephon/agg")
    assert "NoSuchBucket" in err and "no-such-bucket-zephon" in err, err


def checkpoint_error(pipe):
    try:
        pipe.checkpoint()
    except Exception as e:  # noqa: BLE001 - the message is what the tests check
        return str(e)
    return None


def test_store_down_or_dying_mid_upload_fails_the_round_and_writes_nothing(server, corpus, nodes,
                                                                      monkeypatch, tmp_path):
    with FaultProxy(server.port) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        daemons = nodes(2)
        monkeypatch.setenv("AWS_ENDPOINT_URL", server.endpoint)  # the test's own client
        job = Job(corpus, daemons, dp=2, peers=2, run_id="outage", agg=AGG, timeout=20)
        job.step()
        first = job.checkpoint()  # round 0: followers learn where the leader is
        assert s3_has(f"{PREFIX}/outage/checkpoint-00000000.zckpt")

        # Round 1: the store refuses every connection.
        proxy.set_fault(REFUSE)
        job.step()
        errors = list(job.pool.map(checkpoint_error, job.pipes))
        assert all(e is not None for e in errors), "every rank sees the failed round"
        for e in errors:
            assert "cannot write the merged checkpoint" in e, e
            assert f"{AGG}/outage/checkpoint-00000001.zckpt" in e, e
            assert "nothing accepts connections" in e and "after 4 attempts" in e, e
        proxy.set_fault(PASS)
        assert not s3_has(f"{PREFIX}/outage/checkpoint-00000001.zckpt")

        # Round 2: the store dies in the middle of every upload (downloads still work,
        # so followers find the leader through the rendezvous object as usual).
        cut_at = 1000
        proxy.set_fault(DROP_REQUEST, after_bytes=cut_at, methods=("PUT",))
        job.step()
        heads_before = len(proxy.request_heads())
        errors = list(job.pool.map(checkpoint_error, job.pipes))
        puts = [h for h in proxy.request_heads()[heads_before:] if h.startswith(b"PUT ")]
        assert puts, "the leader tried to upload"
        length = int(next(line.split(b":")[1] for line in puts[0].split(b"\r\n")
                          if line.lower().startswith(b"content-length:")))
        assert len(puts[0]) < cut_at < len(puts[0]) + length, "the cut falls inside the body"
        for e in errors:
            assert e is not None and "cannot write the merged checkpoint" in e, e
            assert f"{AGG}/outage/checkpoint-00000002.zckpt" in e, e
        proxy.set_fault(PASS)
        assert not s3_has(f"{PREFIX}/outage/checkpoint-00000002.zckpt")

        # Round 3: downloads hang (uploads work). Followers cannot read the rendezvous
        # object; they give up on it after a bounded wait and report to the leader they
        # found in round 0, so the round completes and its checkpoint is written.
        proxy.set_fault(STALL, methods=("GET",))
        job.step()
        started = time.monotonic()
        stalled = job.checkpoint()
        assert time.monotonic() - started < 20, "bounded by the rendezvous read budget"
        proxy.set_fault(PASS)
        assert all(s == stalled[0] for s in stalled)
        assert s3_get(f"{PREFIX}/outage/checkpoint-00000003.zckpt", tmp_path) == stalled[0]

        # The store is back: the run checkpoints again, without restarting anything.
        job.step()
        again = job.checkpoint()
        assert all(s == again[0] for s in again) and again[0] != first[0]
        assert s3_get(f"{PREFIX}/outage/checkpoint-00000004.zckpt", tmp_path) == again[0]
        job.close()
