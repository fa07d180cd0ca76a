"""Checks deploy/: Kubernetes schema (kubernetes-validate --strict), compose schema (check-jsonschema's vendored
compose-spec), yamllint, and the values that must agree across files (drain deadline vs. grace periods, idle
timeout vs. ingress timeouts, ports, secret paths, labels). Run through deploy/check-manifests.sh, which makes the
virtualenv this needs (PyYAML comes with kubernetes-validate).

Usage: python check_manifests.py DEPLOY_DIR K8S_VERSION... ; prints "N passed, N failed, N skipped".
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

DEPLOY = os.path.abspath(sys.argv[1])
VERSIONS = sys.argv[2:] or ["1.37.0"]
K8S = os.path.join(DEPLOY, "kubernetes")
BIN_DIR = os.path.dirname(sys.executable)
counts = {"passed": 0, "failed": 0, "skipped": 0}


def ok(msg):
    counts["passed"] += 1
    print("ok      - " + msg)


def fail(msg, detail=""):
    counts["failed"] += 1
    print("FAIL    - " + msg)
    for line in str(detail).strip().splitlines()[:20]:
        print("          " + line)


def skip(msg, detail=""):
    counts["skipped"] += 1
    print("skip    - " + msg + (": " + detail if detail else ""))


def check(cond, msg, detail=""):
    (ok if cond else lambda m: fail(m, detail))(msg)
    return cond


def run(cmd, **kw):
    shown = " ".join(os.path.relpath(c, os.getcwd()) if c.startswith("/") and os.path.exists(c) else c for c in cmd)
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    return p.returncode, (p.stdout + p.stderr).strip(), shown


def section(title):
    print("\n## " + title)


def load(path):
    with open(path) as f:
        return list(d for d in yaml.safe_load_all(f) if d is not None)


# ---------------------------------------------------------------------------------------------------------------
section("Kubernetes schema")
kustomization_path = os.path.join(K8S, "kustomization.yaml")
manifests = sorted(os.path.join(K8S, f) for f in os.listdir(K8S)
                   if f.endswith((".yaml", ".yml")) and f != "kustomization.yaml")
for version in VERSIONS:
    rc, out, shown = run([os.path.join(BIN_DIR, "kubernetes-validate"), "--strict", "-k", version] + manifests)
    warnings = [line for line in out.splitlines() if line.startswith("WARN")]
    check(rc == 0 and not warnings,
          "kubernetes-validate --strict -k %s: %d manifests (%s)" % (version, len(manifests),
                                                                  ", ".join(os.path.basename(m) for m in manifests)),
          out)

kustomization = load(kustomization_path)[0]
listed = kustomization.get("resources", [])
missing = [r for r in listed if not os.path.exists(os.path.join(K8S, r))]
check(not missing, "kustomization.yaml: every resource exists", missing)
unlisted = [os.path.basename(m) for m in manifests if os.path.basename(m) not in listed]
check(unlisted == ["secret.example.yaml"], "kustomization.yaml lists every manifest but secret.example.yaml",
      "unlisted: %s" % unlisted)
kubectl = shutil.which("kubectl")
if kubectl:
    rc, rendered, _ = run([kubectl, "kustomize", K8S])
    if check(rc == 0, "kubectl kustomize deploy/kubernetes renders", rendered):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write(rendered)
        docs = list(yaml.safe_load_all(rendered))
        rc, out, _ = run([os.path.join(BIN_DIR, "kubernetes-validate"), "--strict", "-k", VERSIONS[-1], f.name])
        check(rc == 0 and "WARN" not in out and "ERROR" not in out,
              "the rendered kustomization validates (%d resources: %s)" % (
                  len(docs), ", ".join(sorted(d["kind"] for d in docs))), out)
        os.unlink(f.name)
else:
    skip("kubectl kustomize", "kubectl not installed")

# ---------------------------------------------------------------------------------------------------------------
section("YAML lint")
yamllint_config = ("{extends: default, rules: {line-length: {max: 120}, document-start: disable, "
                   "comments: {min-spaces-from-content: 1}, truthy: {check-keys: false}}}")
yaml_files = manifests + [kustomization_path, os.path.join(DEPLOY, "docker-compose.yml")]
rc, out, _ = run([os.path.join(BIN_DIR, "yamllint"), "--strict", "-d", yamllint_config] + yaml_files)
check(rc == 0, "yamllint --strict on %d files" % len(yaml_files), out)

# ---------------------------------------------------------------------------------------------------------------
section("docker-compose.yml")
compose_path = os.path.join(DEPLOY, "docker-compose.yml")
rc, out, _ = run([os.path.join(BIN_DIR, "check-jsonschema"), "--builtin-schema", "vendor.compose-spec", compose_path])
check(rc == 0, "check-jsonschema --builtin-schema vendor.compose-spec docker-compose.yml", out)
compose = load(compose_path)[0]
svc = compose["services"]["sse-relay"]
compose_config = json.load(open(os.path.join(DEPLOY, "config.compose.json")))
drain = compose_config["timeouts"]["drainSeconds"]


def seconds(text):
    m = re.fullmatch(r"(?:(\d+)m)?(?:(\d+)s)?", str(text))
    return int(m.group(1) or 0) * 60 + int(m.group(2) or 0) if m else -1


check(seconds(svc.get("stop_grace_period", "10s")) > drain,
      "stop_grace_period %s > drainSeconds %s" % (svc.get("stop_grace_period"), drain))
check(svc.get("read_only") is True, "read_only root filesystem")
check("no-new-privileges:true" in svc.get("security_opt", []), "security_opt no-new-privileges:true")
check(svc.get("cap_drop") == ["ALL"], "cap_drop ALL")
check(str(svc.get("user", "")).split(":")[0] == "10001", "user 10001 (the image's uid)")
hc_test = svc.get("healthcheck", {}).get("test", [])
check("/healthz" in " ".join(hc_test), "healthcheck on /healthz")
check(hc_test[:3] == ["CMD", "/usr/local/bin/sse-relay", "--probe"],
      "healthcheck runs the relay's --probe (the image has no curl)", hc_test)
config_mounts = [v for v in svc.get("volumes", []) if isinstance(v, dict) and v.get("target") == "/etc/sse-relay/config.json"]
check(len(config_mounts) == 1 and config_mounts[0].get("read_only") is True
      and config_mounts[0].get("source") == "./config.compose.json", "config.compose.json mounted read-only")
secret_targets = ["/run/secrets/" + (s.get("target") or s["source"]) if isinstance(s, dict) else "/run/secrets/" + s
                  for s in svc.get("secrets", [])]
key_files = [u["key"].get("file") for u in compose_config["upstreams"].values()]
check(key_files and all(k in secret_targets for k in key_files),
      "config.compose.json reads the key from the compose secret (%s)" % ", ".join(key_files), secret_targets)
check(compose_config["listen"]["host"] == "0.0.0.0" and "8080:8080" in svc.get("ports", []),
      "listens on 0.0.0.0:8080, published as 8080")
compose_state = compose_config.get("state", {})
compose_redis = re.match(r"redis://([^:/]+)", compose_state.get("redis", {}).get("url", ""))
check(compose_state.get("backend") == "redis" and compose_redis and compose_redis.group(1) in compose["services"]
      and compose_redis.group(1) != "sse-relay",
      "config.compose.json: state.redis.url names the compose redis service", compose_state)
check(compose_config.get("trustedProxies") == [],
      "config.compose.json trusts no proxy (clients connect straight to the published port)",
      compose_config.get("trustedProxies"))

# ---------------------------------------------------------------------------------------------------------------
section("Kubernetes: values that must agree")
by_kind = {}
for m in manifests:
    for d in load(m):
        by_kind.setdefault(d["kind"], []).append(d)
def named(kind, name):
    return next(d for d in by_kind[kind] if d["metadata"]["name"] == name)


dep = named("Deployment", "sse-relay")
pod = dep["spec"]["template"]["spec"]
c = pod["containers"][0]
cm = by_kind["ConfigMap"][0]
config = json.loads(cm["data"]["config.json"])
ok("ConfigMap config.json is JSON")
trusted = config.get("trustedProxies", [])
check(trusted and not any(t.endswith("/0") for t in trusted),
      "ConfigMap trusts the ingress pods' addresses (trustedProxies %s), never everyone" % trusted)
drain = config["timeouts"].get("drainSeconds", 30)
idle = config["timeouts"].get("upstreamIdleSeconds", 300)
pre_stop = c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
pre_stop_s = int(pre_stop[-1]) if pre_stop and pre_stop[-1].isdigit() else 0
grace = pod.get("terminationGracePeriodSeconds", 30)
check(grace > pre_stop_s + drain, "terminationGracePeriodSeconds %d > preStop %d s + drainSeconds %s" % (grace, pre_stop_s, drain))
ports = {p["name"]: p["containerPort"] for p in c["ports"]}
check(ports.get("http") == config["listen"]["port"] and config["listen"]["host"] == "0.0.0.0",
      "container port http = listen 0.0.0.0:%s" % config["listen"]["port"])
check("admin" in config and ports.get("admin") == config["admin"]["port"],
      "container port admin = admin.port %s" % config.get("admin", {}).get("port"))
probes = {k: c.get(k, {}).get("httpGet", {}) for k in ("startupProbe", "livenessProbe", "readinessProbe")}
check(probes["livenessProbe"].get("path") == "/healthz" and probes["readinessProbe"].get("path") == "/readyz"
      and probes["startupProbe"].get("path") == "/healthz", "probes: liveness/startup /healthz, readiness /readyz")
check(all(p.get("port") in ports for p in probes.values()), "probe ports are named container ports", probes)
lp = c["livenessProbe"]
check(lp.get("periodSeconds", 10) * lp.get("failureThreshold", 3) >= 10, "liveness tolerates >= 10 s of failures")
res = c.get("resources", {})
check(all(k in res.get("requests", {}) and k in res.get("limits", {}) for k in ("cpu", "memory")),
      "resources: cpu and memory requests and limits")
workers = [e for e in c.get("env", []) if e["name"] == "SSE_RELAY_WORKERS"]
check(workers and workers[0].get("valueFrom", {}).get("resourceFieldRef", {}).get("resource") == "limits.cpu",
      "SSE_RELAY_WORKERS follows limits.cpu (not the node's core count)")
psc, csc = pod.get("securityContext", {}), c.get("securityContext", {})
check(psc.get("runAsNonRoot") and psc.get("runAsUser") == 10001 and psc.get("seccompProfile", {}).get("type") == "RuntimeDefault",
      "pod securityContext: runAsNonRoot, runAsUser 10001, seccomp RuntimeDefault")
check(csc.get("allowPrivilegeEscalation") is False and csc.get("readOnlyRootFilesystem") is True
      and csc.get("capabilities", {}).get("drop") == ["ALL"] and csc.get("runAsNonRoot") is True,
      "container securityContext: no privilege escalation, read-only root, drop ALL")
check(pod.get("automountServiceAccountToken") is False, "no service account token mounted")

volumes = {v["name"]: v for v in pod["volumes"]}
mounts = {m["name"]: m for m in c["volumeMounts"]}
config_arg = c["args"][c["args"].index("--config") + 1]
cm_vol = [n for n, v in volumes.items() if v.get("configMap", {}).get("name") == cm["metadata"]["name"]]
cm_paths = [os.path.join(mounts[n]["mountPath"], i["path"]) for n in cm_vol for i in volumes[n]["configMap"].get("items", [])]
check(config_arg in cm_paths and all(mounts[n].get("readOnly") for n in cm_vol),
      "--config %s is the ConfigMap's config.json, mounted read-only" % config_arg, cm_paths)
secret = by_kind["Secret"][0]
secret_paths = {}
for n, v in volumes.items():
    if "secret" in v:
        for i in v["secret"].get("items", []):
            secret_paths[os.path.join(mounts[n]["mountPath"], i["path"])] = (v["secret"]["secretName"], i["key"], mounts[n].get("readOnly"))
for u in config["upstreams"].values():
    f = u.get("key", {}).get("file")
    name, key, ro = secret_paths.get(f, (None, None, None))
    check(f in secret_paths and ro and name == secret["metadata"]["name"] and key in secret.get("stringData", secret.get("data", {})),
          "key file %s comes from Secret %s, key %s, mounted read-only" % (f, name, key), secret_paths)
check("FAKE" in json.dumps(secret.get("stringData", {})) and "PLACEHOLDER" in json.dumps(secret.get("stringData", {})),
      "secret.example.yaml holds a clearly fake placeholder")

labels = dep["spec"]["template"]["metadata"]["labels"]
svc_k = named("Service", "sse-relay")
check(all(labels.get(k) == v for k, v in svc_k["spec"]["selector"].items()), "Service selector matches the pods")
check(all(p["targetPort"] in ports for p in svc_k["spec"]["ports"]), "Service target ports are named container ports")

# Shared state: the relay's Redis URL names the in-cluster Redis Service, and neither Service selects the other's pods.
state = config.get("state", {})
check(state.get("backend") == "redis", "ConfigMap: state.backend redis (the HPA runs several replicas)", state)
redis_url = re.match(r"redis://([^:/]+):(\d+)/", state.get("redis", {}).get("url", "") + "/")
redis_svc = named("Service", "sse-relay-redis")
redis_dep = named("Deployment", "sse-relay-redis")
redis_labels = redis_dep["spec"]["template"]["metadata"]["labels"]
check(redis_url and redis_url.group(1) == redis_svc["metadata"]["name"]
      and int(redis_url.group(2)) in [p["port"] for p in redis_svc["spec"]["ports"]],
      "state.redis.url names the Redis Service and its port", state)
check(not all(redis_labels.get(k) == v for k, v in svc_k["spec"]["selector"].items())
      and not all(labels.get(k) == v for k, v in redis_svc["spec"]["selector"].items()),
      "the relay's Service does not select Redis pods, nor the Redis Service relay pods")
pdb = by_kind["PodDisruptionBudget"][0]
check(all(labels.get(k) == v for k, v in pdb["spec"]["selector"]["matchLabels"].items()), "PDB selector matches the pods")
hpa = by_kind["HorizontalPodAutoscaler"][0]
check(hpa["spec"]["scaleTargetRef"]["name"] == dep["metadata"]["name"] and hpa["spec"]["minReplicas"] >= 2,
      "HPA scales the Deployment, minReplicas >= 2 (the PDB can then let one go)")
check("replicas" not in dep["spec"], "Deployment leaves replicas to the HPA")
ing = by_kind["Ingress"][0]
ann = ing["metadata"].get("annotations", {})
pre = "nginx.ingress.kubernetes.io/"
check(ann.get(pre + "proxy-buffering") == "off", "ingress: proxy-buffering off")
check(int(ann.get(pre + "proxy-read-timeout", 60)) > idle and int(ann.get(pre + "proxy-send-timeout", 60)) > idle,
      "ingress: proxy-read/send-timeout %s/%s > upstreamIdleSeconds %s" % (
          ann.get(pre + "proxy-read-timeout"), ann.get(pre + "proxy-send-timeout"), idle))
check(ann.get(pre + "proxy-http-version") == "1.1", "ingress: HTTP/1.1 to the relay")
body = config.get("limits", {}).get("maxBodyBytes", 1048576)
size = ann.get(pre + "proxy-body-size", "1m")
size_bytes = int(size[:-1]) * {"k": 1024, "m": 1048576, "g": 1 << 30}[size[-1].lower()] if size[-1].isalpha() else int(size)
check(size_bytes == body, "ingress: proxy-body-size %s = limits.maxBodyBytes %d" % (size, body))
backends = [p["backend"]["service"] for r in ing["spec"]["rules"] for p in r["http"]["paths"]]
check(all(b["name"] == svc_k["metadata"]["name"] and b["port"].get("name") in [p["name"] for p in svc_k["spec"]["ports"]]
          for b in backends), "ingress backend is the Service's http port")

# ---------------------------------------------------------------------------------------------------------------
section("systemd unit")
unit_path = os.path.join(DEPLOY, "systemd", "sse-relay.service")
unit = {}
for line in open(unit_path):
    line = line.strip()
    if line and not line.startswith(("#", "[")) and "=" in line:
        k, v = line.split("=", 1)
        unit.setdefault(k, []).append(v)
sd_config = json.load(open(os.path.join(DEPLOY, "systemd", "config.json")))
sd_drain = sd_config["timeouts"].get("drainSeconds", 30)
check(int(unit["TimeoutStopSec"][0]) > sd_drain, "TimeoutStopSec %s > drainSeconds %s" % (unit["TimeoutStopSec"][0], sd_drain))
for k, v in [("NoNewPrivileges", "yes"), ("ProtectSystem", "strict"), ("Restart", "on-failure"),
             ("LimitNOFILE", "65536"), ("DynamicUser", "yes"), ("KillSignal", "SIGTERM")]:
    check(unit.get(k, [None])[0] == v, "%s=%s" % (k, v), unit.get(k))
creds = {v.split(":", 1)[0]: v.split(":", 1)[1] for v in unit.get("LoadCredential", [])}
sd_keys = [u["key"].get("file") for u in sd_config["upstreams"].values()]
check(all(k and k.startswith("/run/credentials/sse-relay.service/") and os.path.basename(k) in creds for k in sd_keys),
      "the key comes from LoadCredential (%s)" % ", ".join(sd_keys), creds)
analyze = shutil.which("systemd-analyze")
if analyze:
    with tempfile.TemporaryDirectory() as d:
        # verify needs the ExecStart binary to exist: point it at /bin/true for the check.
        text = open(unit_path).read().replace("/usr/local/bin/sse-relay", "/bin/true")
        p = os.path.join(d, "sse-relay.service")
        open(p, "w").write(text)
        rc, out, _ = run([analyze, "verify", p])
        check(rc == 0 and not out, "systemd-analyze verify sse-relay.service", out)
else:
    skip("systemd-analyze verify", "systemd-analyze not installed")

# ---------------------------------------------------------------------------------------------------------------
section("Configurations against the relay (--check-config)")
binary = os.environ.get("SSE_RELAY_BIN") or next(
    (b for b in ("/tmp/build-deploy-image/context/.build/release/sse-relay", "/tmp/build-deploy/release/sse-relay",
                 os.path.join(DEPLOY, "..", ".build", "release", "sse-relay"),
                 os.path.join(DEPLOY, "..", ".build", "debug", "sse-relay")) if os.access(b, os.X_OK)), None)
if binary:
    with tempfile.TemporaryDirectory() as d:
        keyfile = os.path.join(d, "key")
        open(keyfile, "w").write("sk-check-config-placeholder\n")
        for name, cfg in [("deploy/config.compose.json", compose_config), ("ConfigMap config.json", config),
                          ("deploy/systemd/config.json", sd_config)]:
            cfg = json.loads(json.dumps(cfg))
            for u in cfg["upstreams"].values():
                if "file" in u.get("key", {}):
                    u["key"]["file"] = keyfile  # the mounted path does not exist here
            p = os.path.join(d, "config.json")
            json.dump(cfg, open(p, "w"))
            rc, out, _ = run([binary, "--check-config", p])
            check(rc == 0, "%s passes --check-config (%s)" % (name, binary), out)
            check(all(r.get("auth") not in (None, "none") for r in cfg["routes"]),
                  "%s: every route authenticates its clients" % name, cfg["routes"])
else:
    skip("--check-config of the configurations", "no sse-relay binary found (set SSE_RELAY_BIN)")

print("\n%(passed)d passed, %(failed)d failed, %(skipped)d skipped" % counts)
sys.exit(1 if counts["failed"] else 0)
