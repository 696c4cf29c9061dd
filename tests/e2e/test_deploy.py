"""Static checks of deploy/: the systemd unit (systemd-analyze verify), the Kubernetes
manifests (parsed with PyYAML; kubectl's client-side dry run when it works without a
cluster) and the container build. Nothing here starts a service or a container."""
from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
UNIT = DEPLOY / "systemd" / "zephond.service"
CONF = DEPLOY / "systemd" / "zephond.conf.example"
DAEMONSET = DEPLOY / "kubernetes" / "zephond-daemonset.yaml"
TRAINER = DEPLOY / "kubernetes" / "trainer-pod-example.yaml"
DOCKERFILE = DEPLOY / "container" / "Dockerfile"
DOC = ROOT / "docs" / "deploy.md"
ZEPHOND = ROOT / "client" / "python" / "zephon" / "_native" / "zephond"



# ---- helpers ----------------------------------------------------------------------------

def unit_settings(path: Path) -> dict[str, list[str]]:
    """Key -> values (in order) of a unit file, sections merged; comments dropped."""
    out: dict[str, list[str]] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        key, _, value = line.partition("=")
        out.setdefault(key.strip(), []).append(value.strip())
    return out


def zephond_flags() -> set[str]:
    if not ZEPHOND.exists():
        pytest.skip(f"{ZEPHOND} is not built (make build)")
    help_text = subprocess.run([str(ZEPHOND), "--help"], capture_output=True, text=True,
                               timeout=30).stdout
    return set(re.findall(r"(--[a-z][a-z0-9-]+)", help_text))


def flags_in(args: str) -> set[str]:
    return {a for a in shlex.split(args) if a.startswith("--")}


def conf_args(path: Path) -> str:
    """ZEPHOND_ARGS as /bin/sh sees it after sourcing the file (as the DaemonSet does)."""
    r = subprocess.run(["/bin/sh", "-c", 'set -a; . "$1"; printf %s "$ZEPHOND_ARGS"', "sh",
                        str(path)], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, r.stderr
    return r.stdout


def load_yaml(path: Path) -> list[dict]:
    yaml = pytest.importorskip("yaml", reason="python3-yaml (Debian) is not installed")
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    assert docs, f"{path} holds no YAML documents"
    return docs


def pod_specs(docs: list[dict]) -> list[tuple[str, dict]]:
    out = []
    for d in docs:
        if d["kind"] == "Pod":
            out.append((d["metadata"]["name"], d["spec"]))
        elif d["kind"] in ("DaemonSet", "Deployment", "StatefulSet", "Job"):
            out.append((d["metadata"]["name"], d["spec"]["template"]["spec"]))
    return out


# ---- systemd ----------------------------------------------------------------------------

def test_unit_directives():
    s = unit_settings(UNIT)
    one = {k: v[-1] for k, v in s.items()}
    assert one["Type"] == "simple"  # zephond does not sd_notify
    exec_start = one["ExecStart"].split()
    assert exec_start[0] == "/usr/local/bin/zephond"
    start = " ".join(exec_start)
    assert "--socket /run/zephon/zephond.sock" in start
    assert "--shm-group zephon" in start and "--log-level info" in start
    assert "$ZEPHOND_ARGS" in exec_start
    assert one["EnvironmentFile"].lstrip("-") == "/etc/zephon/zephond.conf"
    assert one["RuntimeDirectory"] == "zephon" and one["RuntimeDirectoryMode"] == "0750"
    assert one["User"] == "zephon" and one["Group"] == "zephon"
    assert one["Restart"] == "on-failure" and one["KillSignal"] == "SIGTERM"
    assert "TimeoutStopSec" in one and "LimitMEMLOCK" in one and "LimitNOFILE" in one
    for key in ("NoNewPrivileges", "PrivateTmp", "ProtectKernelTunables",
                "ProtectKernelModules", "LockPersonality", "MemoryDenyWriteExecute",
                "CPUAccounting", "IOAccounting", "MemoryAccounting"):
        assert one[key] == "yes", key
    assert one["ProtectSystem"] == "strict"
    assert one["ProtectHome"] == "read-only"
    assert one["SystemCallArchitectures"] == "native"
    assert one["RestrictAddressFamilies"].split() == ["AF_UNIX", "AF_INET", "AF_INET6"]
    rw = " ".join(s["ReadWritePaths"]).split()
    assert "/dev/shm" in rw
    # Rings are memfds, but /dev/shm stays shared for the legacy sweep and older daemons:
    # PrivateDevices=yes keeps it (systemd bind-mounts the host's into the private /dev);
    # what WOULD hide it from the trainers must be absent.
    assert one.get("PrivateIPC", "no") == "no"
    for key in ("InaccessiblePaths", "TemporaryFileSystem"):
        assert not any("/dev/shm" in v for v in s.get(key, [])), key
    # The daemon chowns its sockets (and a directory it creates) to --shm-group: @chown
    # must stay allowed.
    assert not any(v.startswith("~") and ("@privileged" in v or "@chown" in v)
                   for v in s.get("SystemCallFilter", []))
    text = UNIT.read_text()
    assert "CPUQuota" in text and "AllowedCPUs" in text  # guidance in comments


def test_unit_flags_are_known_to_zephond():
    known = zephond_flags()
    exec_start = unit_settings(UNIT)["ExecStart"][-1].replace("$ZEPHOND_ARGS", "")
    used = flags_in(exec_start) | flags_in(conf_args(CONF))
    # Every flag in the commented examples of the config file as well.
    for line in CONF.read_text().splitlines():
        m = re.match(r'#\s*ZEPHOND_ARGS="(.*)"', line)
        if m:
            used |= flags_in(m.group(1).replace("...", ""))
    unknown = used - known
    assert not unknown, f"flags zephond --help does not list: {sorted(unknown)}"


def _verify(unit_copy: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["systemd-analyze", "verify", str(unit_copy)], capture_output=True,
                          text=True, timeout=60)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_systemd_analyze_verify(tmp_path):
    unit = tmp_path / "zephond.service"
    text = UNIT.read_text()
    built = ZEPHOND.exists()
    if built:  # point ExecStart at the built binary so no warning is expected at all
        text = text.replace("/usr/local/bin/zephond", str(ZEPHOND))
    unit.write_text(text)
    r = _verify(unit)
    lines = [l for l in (r.stdout + r.stderr).splitlines() if l.strip()]
    expected = [] if built else [re.compile(r"is not executable: No such file or directory")]
    # A machine without systemd as PID 1 may add lines about the manager itself, not the unit.
    benign = [re.compile(r"(Failed to|Cannot) (connect|access).*bus", re.I),
              re.compile(r"/(usr/)?lib/systemd/system/.*", re.I)]
    unexpected = [l for l in lines
                  if not any(p.search(l) for p in expected + benign)]
    assert not unexpected, "systemd-analyze verify:\n" + "\n".join(lines)
    assert r.returncode == 0 or not built, r.stderr

    # And the unit as shipped: the only complaint is the not-yet-installed binary.
    r = _verify(UNIT)
    lines = [l for l in (r.stdout + r.stderr).splitlines() if l.strip()]
    bad = [l for l in lines if "/usr/local/bin/zephond is not executable" not in l
           and not any(p.search(l) for p in benign)]
    assert not bad, "\n".join(lines)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_systemd_security_exposure(tmp_path):
    unit = tmp_path / "zephond.service"
    unit.write_text(UNIT.read_text().replace("/usr/local/bin/zephond", str(ZEPHOND)))
    r = subprocess.run(["systemd-analyze", "security", "--offline=yes", str(unit)],
                       capture_output=True, text=True, timeout=60)
    m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", r.stdout + r.stderr)
    if m is None:
        pytest.skip("this systemd-analyze has no offline security analysis: "
                    + (r.stderr.strip().splitlines() or ["?"])[-1])
    assert float(m.group(1)) <= 2.5, r.stdout


def test_conf_example_is_sourceable():
    args = conf_args(CONF)
    assert "--worker-threads" in args and "--max-ring-bytes" in args
    # The same file format feeds systemd: no shell syntax beyond KEY="value".
    for line in CONF.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            assert re.fullmatch(r'[A-Z_][A-Z0-9_]*="[^"$`\\]*"', line.strip()), line


# ---- Kubernetes -------------------------------------------------------------------------

KNOWN_KINDS = {
    "Namespace": "v1", "ServiceAccount": "v1", "ConfigMap": "v1", "Pod": "v1",
    "Secret": "v1", "Service": "v1", "DaemonSet": "apps/v1",
    "PriorityClass": "scheduling.k8s.io/v1",
}


@pytest.mark.parametrize("path", [DAEMONSET, TRAINER], ids=lambda p: p.name)
def test_manifest_structure(path):
    docs = load_yaml(path)
    for d in docs:
        assert d.get("kind") in KNOWN_KINDS, d.get("kind")
        assert d.get("apiVersion") == KNOWN_KINDS[d["kind"]], (d["kind"], d.get("apiVersion"))
        assert d.get("metadata", {}).get("name"), d["kind"]
    specs = pod_specs(docs)
    assert specs, f"{path.name} defines no pod"
    for name, spec in specs:
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        assert len(volumes) == len(spec.get("volumes", [])), f"{name}: duplicate volume names"
        psc = spec.get("securityContext", {})
        assert psc.get("runAsNonRoot") is True, name
        assert psc.get("seccompProfile", {}).get("type") == "RuntimeDefault", name
        assert 2000 in psc.get("supplementalGroups", []) or psc.get("runAsGroup") == 2000
        for c in spec.get("initContainers", []) + spec["containers"]:
            res = c.get("resources", {})
            assert res.get("requests") and res.get("limits"), f"{c['name']}: resources"
            for m in c.get("volumeMounts", []):
                assert m["name"] in volumes, f"{c['name']} mounts unknown volume {m['name']}"
            csc = c.get("securityContext", {})
            assert csc.get("allowPrivilegeEscalation") is False, c["name"]
            assert "ALL" in csc.get("capabilities", {}).get("drop", []), c["name"]
        mounts = {m["mountPath"]: volumes[m["name"]]
                  for c in spec["containers"] for m in c.get("volumeMounts", [])}
        # The sockets (rings come through them as memfds) and the legacy /dev/shm: the
        # node's directories, shared across pods.
        assert mounts["/run/zephon"]["hostPath"]["path"] == "/run/zephon"
        assert mounts["/dev/shm"]["hostPath"]["path"] == "/dev/shm"


def test_daemonset_details(tmp_path):
    docs = load_yaml(DAEMONSET)
    by_kind = {d["kind"]: d for d in docs}
    ds = by_kind["DaemonSet"]
    assert ds["spec"]["selector"]["matchLabels"].items() <= \
        ds["spec"]["template"]["metadata"]["labels"].items()
    assert ds["spec"]["updateStrategy"]["type"] == "RollingUpdate"
    assert ds["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] >= 1
    spec = ds["spec"]["template"]["spec"]
    assert spec["priorityClassName"] == "system-node-critical"
    assert spec["terminationGracePeriodSeconds"] >= 10
    assert spec["tolerations"] and spec["nodeSelector"]
    assert spec["serviceAccountName"] == by_kind["ServiceAccount"]["metadata"]["name"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["run-zephon"]["hostPath"]["type"] == "DirectoryOrCreate"
    cm_names = {v["configMap"]["name"] for v in spec["volumes"] if "configMap" in v}
    assert by_kind["ConfigMap"]["metadata"]["name"] in cm_names
    assert "zephond.conf" in by_kind["ConfigMap"]["data"]

    (c,) = spec["containers"]
    ports = {p["name"]: p for p in c["ports"]}
    assert "metrics" in ports and "peer" in ports
    assert spec.get("hostNetwork") is True or "hostPort" in ports["peer"]
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = c[probe]["httpGet"]
        assert get["path"] == path
        assert get["port"] in ("metrics", ports["metrics"]["containerPort"])
    res = c["resources"]
    assert res["requests"]["cpu"] == res["limits"]["cpu"], "fixed CPU budget"
    assert "memory" in res["limits"]
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["runAsNonRoot"] is True
    assert sc["capabilities"]["drop"] == ["ALL"] and not sc["capabilities"].get("add")
    assert sc["runAsUser"] == spec["securityContext"]["runAsUser"] == 2000

    script = " ".join(c["command"] + c["args"])
    assert "exec /usr/local/bin/zephond" in script  # SIGTERM reaches zephond itself
    assert "--metrics-address 0.0.0.0:%d" % ports["metrics"]["containerPort"] in script
    assert "--peer-address 0.0.0.0:%d" % ports["peer"]["containerPort"] in script
    # The peer port is authenticated: the secret comes from a Secret volume that only the
    # daemon's group can read (issue 12).
    secret_flag = re.search(r"--peer-secret-file (\S+)", script)
    assert secret_flag, "the DaemonSet must authenticate peers (--peer-secret-file)"
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert secret_flag.group(1).startswith(mounts["peer-secret"] + "/")
    secret_volume = volumes["peer-secret"]["secret"]
    assert secret_volume["defaultMode"] in (0o400, 0o440) and not secret_volume.get("optional")
    assert spec["securityContext"]["fsGroup"] == 2000
    assert "--peer-insecure" not in script
    # The ConfigMap's file is the systemd example's format: sourceable, known flags.
    known = zephond_flags()
    cm_file = tmp_path / "zephond.conf"
    cm_file.write_text(by_kind["ConfigMap"]["data"]["zephond.conf"])
    used = flags_in(conf_args(cm_file))
    used |= {a for a in c["args"][0].split() if a.startswith("--")}
    unknown = used - known
    assert not unknown, f"flags zephond --help does not list: {sorted(unknown)}"


def test_trainer_pod_wiring():
    (pod,) = load_yaml(TRAINER)
    (c,) = pod["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["ZEPHON_SOCKET"] == "/run/zephon/zephond.sock"
    assert 2000 in pod["spec"]["securityContext"]["supplementalGroups"]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")
def test_kubectl_client_dry_run():
    r = subprocess.run(["kubectl", "apply", "--dry-run=client", "--validate=false",
                        "-f", str(DAEMONSET), "-f", str(TRAINER)],
                       capture_output=True, text=True, timeout=60)
    out = r.stdout + r.stderr
    if r.returncode != 0 and re.search(r"connection refused|unable to recognize|"
                                       r"couldn't get current server|no such host|"
                                       r"the server could not|dial tcp", out):
        pytest.skip("kubectl needs an API server even for --dry-run=client here: "
                    + out.strip().splitlines()[-1])
    assert r.returncode == 0, out
    assert "daemonset.apps/zephond created (dry run)" in out


# ---- container --------------------------------------------------------------------------

def test_dockerfile():
    lines = [l.strip() for l in DOCKERFILE.read_text().splitlines()]
    froms = [l for l in lines if l.startswith("FROM ")]
    assert froms[0].startswith("FROM debian:bookworm ") and froms[0].endswith(" AS build")
    assert froms[-1] == "FROM debian:bookworm-slim"
    text = DOCKERFILE.read_text()
    build, runtime = text.split("FROM debian:bookworm-slim", 1)
    assert "bazel-bootstrap" in build and "make build" in build
    for pkg in ("libgrpc++1.51", "libprotobuf32", "libabsl20220623", "libspdlog1.10",
                "libfmt9", "libzstd1", "zlib1g"):
        assert re.search(rf"(?<![\w.+-]){re.escape(pkg)}(?![\w.+-])", runtime), pkg
    assert "-dev" not in runtime and "bazel" not in runtime.split("COPY --from")[0]
    assert "COPY --from=build" in runtime
    users = [l.split()[1] for l in lines if l.startswith("USER ")]
    assert users and users[-1].split(":")[0] not in ("0", "root")
    assert any(l.startswith('ENTRYPOINT ["/usr/local/bin/zephond"]') for l in lines)
    # Every COPY source exists in the tree (build context = repository root).
    for l in lines:
        if l.startswith("COPY ") and "--from" not in l:
            for src in l.split()[1:-1]:
                assert (ROOT / src).exists(), src
    # The runtime libraries cover what the built binary links (when it is built here).
    if ZEPHOND.exists() and shutil.which("ldd"):
        libs = subprocess.run(["ldd", str(ZEPHOND)], capture_output=True, text=True).stdout
        sonames = {l.split()[0] for l in libs.splitlines() if "=>" in l}
        for prefix in ("libgrpc++.so.1.51", "libprotobuf.so.32", "libspdlog.so.1.10",
                       "libfmt.so.9", "libzstd.so.1", "libz.so.1"):
            assert prefix in sonames, (prefix, sorted(sonames))


# ---- docs ---------------------------------------------------------------------------------

def test_deploy_doc_quotes_ring_formula():
    doc = DOC.read_text()
    src = (ROOT / "daemon" / "batch_slot.h").read_text()
    # The doc's tensors are the ones the daemon lays out and sizes its slots from.
    assert "BatchSchema::SlotPayloadBytes" in doc and "uint64_t SlotPayloadBytes() const;" in src
    for tensor in ("tokens      int32 [rows, cols]", "positions   int32 [rows, cols]",
                   "sample_ids  int64 [n, 3]"):
        assert tensor in src, tensor
    assert "tokens int32 [rows, cols] + positions int32 [rows, cols] + sample_ids int64 [cells, 3]" in doc
    for needle in ("--shm-size", "--ipc=host", "sizeLimit", "--max-ring-bytes",
                   "--shm-group", "--peer-tls-cert", "SIGTERM", "hostPath"):
        assert needle in doc, needle
    index = (DEPLOY / "README.md").read_text()
    for p in (UNIT, CONF, DAEMONSET, TRAINER, DOCKERFILE):
        assert str(p.relative_to(DEPLOY)) in index, p.name
