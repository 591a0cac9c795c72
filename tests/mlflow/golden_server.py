#!/usr/bin/env python3
"""A loopback MLflow tracking server for air-run's tests, held to recorded exchanges.

It keeps experiments and runs in memory and answers the REST endpoints air-run
uses (and those a test reads back with) in the shapes recorded from real MLflow
servers (tests/data/mlflow/mlflow-<version>-rest.json). It is strict where a
real server is strict and stricter where the recordings are silent: a request
whose endpoint, method, Content-Type, fields or field types differ from what
the recorded servers took is answered 400 INVALID_PARAMETER_VALUE (or 404
ENDPOINT_NOT_FOUND) and logged as rejected, so the tests fail on it.

On start it checks its own request rules against every recorded request (a
recorded 200 must pass, the recorded missing-Content-Type request must fail)
and its generated answers against the recorded answers' fields, and refuses to
run when they disagree.

Standard library only. Usage (the tests' way):
  golden_server.py --port-file PORT [--log requests.jsonl] [--version 2.17.2]
                   [--token T | --basic USER:PASSWORD]
                   [--fail-first N --fail-status 503 [--fail-endpoint runs/create]]
                   [--drop-replies N [--drop-endpoint runs/create]]
                   [--delay-ms MS [--delay-endpoint runs/create]]
                   [--artifact-root mlflow-artifacts:] [--lifetime 300]
It writes its port to PORT once listening, and exits after --lifetime seconds.
--drop-replies N carries out the first N requests (of --drop-endpoint) and
closes the connection without answering: a reply lost on the way back.
--delay-ms holds every API answer back (of --delay-endpoint only, when given),
like a server that commits to a database.
GET /air-test/state returns the whole store as JSON (for assertions);
GET /air-test/fail-all makes every later API request fail with --fail-status.
"""

import argparse
import base64
import copy
import hashlib
import json
import os
import re
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "mlflow")
API = "/api/2.0/mlflow/"
ARTIFACTS = "/api/2.0/mlflow-artifacts/artifacts/"

# ---------------------------------------------------------------------------- request rules

STR, INT, NUM = "string", "integer", "number"
KV = ("list", {"key": STR, "value": STR})
METRICS = ("list", {"key": STR, "value": NUM, "timestamp": INT, "step": INT})

# (method, endpoint) -> (allowed body fields and their types, required fields,
#                        allowed query parameters, required query parameters)
RULES = {
    ("GET", "experiments/get-by-name"): ({}, [], ["experiment_name"], ["experiment_name"]),
    ("POST", "experiments/create"): ({"name": STR, "artifact_location": STR, "tags": KV}, ["name"], [], []),
    ("POST", "runs/create"): ({"experiment_id": STR, "run_name": STR, "start_time": INT, "tags": KV,
                               "user_id": STR}, ["experiment_id"], [], []),
    ("POST", "runs/log-batch"): ({"run_id": STR, "metrics": METRICS, "params": KV, "tags": KV},
                                 ["run_id"], [], []),
    ("POST", "runs/update"): ({"run_id": STR, "status": STR, "end_time": INT, "run_name": STR},
                              ["run_id"], [], []),
    ("GET", "runs/get"): ({}, [], ["run_id"], ["run_id"]),
    ("GET", "metrics/get-history"): ({}, [], ["run_id", "metric_key", "max_results", "page_token"],
                                     ["run_id", "metric_key"]),
    ("POST", "runs/search"): ({"experiment_ids": ("list", STR), "filter": STR, "max_results": INT,
                               "order_by": ("list", STR), "page_token": STR}, ["experiment_ids"], [], []),
}


def type_error(value, kind, where):
    """None when `value` has type `kind`, else a message naming `where`."""
    if kind == STR:
        ok = isinstance(value, str)
    elif kind == INT:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind == NUM:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif isinstance(kind, tuple) and kind[0] == "list":
        if not isinstance(value, list):
            return "%s: expected a list" % where
        for i, item in enumerate(value):
            if isinstance(kind[1], dict):
                if not isinstance(item, dict):
                    return "%s[%d]: expected an object" % (where, i)
                missing = sorted(set(kind[1]) - set(item))
                if missing and not (kind is METRICS and missing == ["step"]):
                    return "%s[%d]: missing %s" % (where, i, ", ".join(missing))
                for k, v in item.items():
                    if k not in kind[1]:
                        return "%s[%d]: unknown field %r" % (where, i, k)
                    err = type_error(v, kind[1][k], "%s[%d].%s" % (where, i, k))
                    if err:
                        return err
            else:
                err = type_error(item, kind[1], "%s[%d]" % (where, i))
                if err:
                    return err
        return None
    else:
        return "%s: no rule" % where
    return None if ok else "%s: expected %s, got %s" % (where, kind, type(value).__name__)


def check_request(method, endpoint, query, content_type, body):
    """None when the request has a shape the recorded servers took, else why not."""
    rule = RULES.get((method, endpoint))
    if rule is None:
        return "no endpoint %s %s" % (method, endpoint)
    fields, required, query_allowed, query_required = rule
    for name in query:
        if name not in query_allowed:
            return "unknown query parameter %r" % name
    for name in query_required:
        if name not in query:
            return "missing query parameter %r" % name
    if method == "GET":
        return None if body is None else "a GET with a body"
    if content_type != "application/json":
        return "Bad Request. Content-Type must be one of ['application/json']."
    if not isinstance(body, dict):
        return "the body is not a JSON object"
    for name in required:
        if name not in body:
            return "missing field %r" % name
    for name, value in body.items():
        if name not in fields:
            return "unknown field %r" % name
        err = type_error(value, fields[name], name)
        if err:
            return err
    return None


# ---------------------------------------------------------------------------- the store

class Store:
    """Experiments and runs in memory, with MLflow's rules for them."""

    def __init__(self, artifact_root, version="2.17.2"):
        self.v3 = version.startswith("3.")  # 3.x adds "inputs"/"outputs" to run answers
        self.lock = threading.Lock()
        self.experiments = {"0": {"experiment_id": "0", "name": "Default", "tags": []}}
        self.next_experiment = 1
        self.runs = {}
        self.artifacts = {}  # "exp/run/artifacts/name" -> text
        self.artifact_bytes = {}  # "exp/run/artifacts/name" -> {"length", "sha256", "content_type"}
        self.artifact_root = artifact_root

    def artifact_uri(self, exp, run_id):
        if self.artifact_root.startswith("mlflow-artifacts:"):
            return "mlflow-artifacts:/%s/%s/artifacts" % (exp, run_id)
        return "%s/%s/%s/artifacts" % (self.artifact_root.rstrip("/"), exp, run_id)

    def run_info(self, run):
        info = {k: run[k] for k in ("run_uuid", "experiment_id", "run_name", "user_id", "status",
                                    "start_time")}
        if run.get("end_time") is not None:
            info["end_time"] = run["end_time"]
        info.update({"artifact_uri": run["artifact_uri"], "lifecycle_stage": "active",
                     "run_id": run["run_id"]})
        return info

    def run_data(self, run, full):
        data = {}
        if full and run["metrics"]:
            latest = {}
            for m in run["metrics"]:  # MLflow's latest: max by (step, timestamp, value)
                best = latest.get(m["key"])
                if best is None or (m["step"], m["timestamp"], m["value"]) >= (
                        best["step"], best["timestamp"], best["value"]):
                    latest[m["key"]] = m
            data["metrics"] = list(latest.values())
        if full and run["params"]:
            data["params"] = [{"key": k, "value": v} for k, v in run["params"].items()]
        if run["tags"]:
            data["tags"] = [{"key": k, "value": v} for k, v in run["tags"].items()]
        return data


def error(status, code, message):
    return status, {"error_code": code, "message": message}


class Api:
    """One method per endpoint: (status, JSON answer)."""

    def __init__(self, store):
        self.s = store

    def get_experiment_by_name(self, q, _):
        name = q["experiment_name"]
        for e in self.s.experiments.values():
            if e["name"] == name:
                return 200, {"experiment": {
                    "experiment_id": e["experiment_id"], "name": e["name"],
                    "artifact_location": "ARTIFACT_ROOT/" + e["experiment_id"],
                    "lifecycle_stage": "active", "last_update_time": e["time"],
                    "creation_time": e["time"], "tags": e["tags"]}}
        return error(404, "RESOURCE_DOES_NOT_EXIST",
                     "Could not find experiment with name '%s'" % name)

    def create_experiment(self, _, b):
        if any(e["name"] == b["name"] for e in self.s.experiments.values()):
            return error(400, "RESOURCE_ALREADY_EXISTS",
                         "Experiment(name=%s) already exists." % b["name"])
        exp = str(self.s.next_experiment)
        self.s.next_experiment += 1
        self.s.experiments[exp] = {"experiment_id": exp, "name": b["name"], "tags": b.get("tags", []),
                                   "time": int(time.time() * 1000)}
        return 200, {"experiment_id": exp}

    def create_run(self, _, b):
        exp = b["experiment_id"]
        if exp not in self.s.experiments:
            return error(404, "RESOURCE_DOES_NOT_EXIST", "No Experiment with id=%s exists" % exp)
        run_id = uuid.uuid4().hex
        name = b.get("run_name") or "air-test-%s" % run_id[:6]
        tags = {t["key"]: t["value"] for t in b.get("tags", [])}
        tags["mlflow.runName"] = name
        run = {"run_uuid": run_id, "run_id": run_id, "experiment_id": exp, "run_name": name,
               "user_id": "", "status": "RUNNING",
               "start_time": b.get("start_time", int(time.time() * 1000)), "end_time": None,
               "artifact_uri": self.s.artifact_uri(exp, run_id), "params": {}, "tags": tags,
               "metrics": [], "created_at": time.time()}
        self.s.runs[run_id] = run
        answer = {"run": {"info": self.s.run_info(run), "data": self.s.run_data(run, False)}}
        if self.s.v3:
            answer["run"]["inputs"] = {}
        return 200, answer

    def _run(self, run_id):
        run = self.s.runs.get(run_id)
        if run is None:
            return None, error(404, "RESOURCE_DOES_NOT_EXIST", "Run with id=%s not found" % run_id)
        return run, None

    def log_batch(self, _, b):
        run, err = self._run(b["run_id"])
        if err:
            return err
        changed = [{"key": p["key"], "old_value": run["params"][p["key"]], "new_value": p["value"]}
                   for p in b.get("params", [])
                   if p["key"] in run["params"] and run["params"][p["key"]] != p["value"]]
        if changed:
            return error(400, "INVALID_PARAMETER_VALUE",
                         "Changing param values is not allowed. Params were already logged='%s' for "
                         "run ID='%s'." % (changed, run["run_id"]))
        if len(b.get("params", [])) > 100 or len(b.get("tags", [])) > 100 or \
                len(b.get("metrics", [])) > 1000:
            return error(400, "INVALID_PARAMETER_VALUE", "A batch logging request can contain at most "
                         "1000 metrics, 100 params and 100 tags")
        for p in b.get("params", []):
            run["params"][p["key"]] = p["value"]
        for t in b.get("tags", []):
            run["tags"][t["key"]] = t["value"]
        for m in b.get("metrics", []):
            run["metrics"].append({"key": m["key"], "value": m["value"], "timestamp": m["timestamp"],
                                   "step": m.get("step", 0)})
        return 200, {}

    def update_run(self, _, b):
        run, err = self._run(b["run_id"])
        if err:
            return err
        # As recorded: an unknown status is answered 200 and changes nothing.
        if b.get("status") in ("RUNNING", "SCHEDULED", "FINISHED", "FAILED", "KILLED"):
            run["status"] = b["status"]
            if "end_time" in b:
                run["end_time"] = b["end_time"]
            run.setdefault("status_history", []).append(b["status"])
        if "run_name" in b:
            run["run_name"] = b["run_name"]
        return 200, {"run_info": self.s.run_info(run)}

    def get_run(self, q, _):
        run, err = self._run(q["run_id"])
        if err:
            return err
        return 200, {"run": self.full_run(run)}

    def get_history(self, q, _):
        run, err = self._run(q["run_id"])
        if err:
            return err
        return 200, {"metrics": [m for m in run["metrics"] if m["key"] == q["metric_key"]]}

    def search_runs(self, _, b):
        # One tag compared for equality, MLflow's grammar: tags.KEY = 'VALUE' (KEY may hold
        # dots, as in the recorded tags.mlflow.parentRunId, or be in backticks).
        m = re.fullmatch(r"\s*tags\.(`[^`]+`|[\w.]+)\s*=\s*'([^']*)'\s*", b.get("filter", ""))
        if b.get("filter") and not m:
            return error(400, "INVALID_PARAMETER_VALUE", "this test server filters by one tag only")
        key = m.group(1).strip("`") if m else None
        runs = [r for r in self.s.runs.values() if r["experiment_id"] in b["experiment_ids"]
                and (not m or r["tags"].get(key) == m.group(2))]
        return 200, {"runs": [self.full_run(r) for r in runs]}

    def full_run(self, run):
        out = {"info": self.s.run_info(run), "data": self.s.run_data(run, True), "inputs": {}}
        if self.s.v3:
            out["outputs"] = {}
        return out


HANDLERS = {
    "experiments/get-by-name": Api.get_experiment_by_name,
    "experiments/create": Api.create_experiment,
    "runs/create": Api.create_run,
    "runs/log-batch": Api.log_batch,
    "runs/update": Api.update_run,
    "runs/get": Api.get_run,
    "metrics/get-history": Api.get_history,
    "runs/search": Api.search_runs,
}


# ---------------------------------------------------------------------------- self-check

def shape(value):
    """The fields of an answer, recursively: what a generated answer must match."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


def substitute(value, ids):
    """The recorded ids replaced by the ones this store gave: whole strings
    (experiment ids), and run ids inside strings (a search filter)."""
    if isinstance(value, dict):
        return {k: substitute(v, ids) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, ids) for v in value]
    if isinstance(value, str):
        if value in ids:
            return ids[value]
        for old, new in ids.items():
            if len(old) == 32:
                value = value.replace(old, new)
    return value


def self_check(recordings, version):
    """Every recorded request against RULES; generated answers against recorded ones."""
    problems = []
    for exchange in recordings["exchanges"]:
        body = exchange["request"]
        why = check_request(exchange["method"], exchange["path"], exchange["query"] or {},
                            exchange["content_type"], body)
        shape_rejected = exchange["status"] == 400 and "Content-Type" in json.dumps(exchange["response"])
        if shape_rejected and why is None:
            problems.append("rules accept what the server rejected: %s" % exchange["path"])
        if not shape_rejected and why is not None:
            problems.append("rules reject what the server took: %s %s: %s"
                            % (exchange["method"], exchange["path"], why))
    # Replay the recorded conversation on a fresh store and compare answer shapes.
    store = Store("ARTIFACT_ROOT", version)
    api = Api(store)
    ids = {}
    for exchange in recordings["exchanges"]:
        if exchange["status"] == 400 and "Content-Type" in json.dumps(exchange["response"]):
            continue
        body, query = substitute([exchange["request"], exchange["query"]], ids)
        status, answer = HANDLERS[exchange["path"]](api, query or {}, body)
        if status != exchange["status"]:
            problems.append("%s: status %s, recorded %s" % (exchange["path"], status,
                                                              exchange["status"]))
            continue
        recorded = exchange["response"]
        if status == 200 and exchange["path"] == "experiments/create":
            ids[recorded["experiment_id"]] = answer["experiment_id"]
        if status == 200 and exchange["path"] == "runs/create":
            ids[recorded["run"]["info"]["run_id"]] = answer["run"]["info"]["run_id"]
        if status != 200:
            if answer["error_code"] != recorded["error_code"]:
                problems.append("%s: error %s, recorded %s" % (exchange["path"], answer["error_code"],
                                                               recorded["error_code"]))
            continue
        if exchange["path"] == "metrics/get-history" and "metrics" not in recorded:
            continue  # 3.6.1.dev0 answered this call with a page token only
        if shape(answer) != shape(recorded):
            problems.append("%s: answer fields %s, recorded %s" % (exchange["path"], shape(answer),
                                                                   shape(recorded)))
    return problems


# ---------------------------------------------------------------------------- HTTP

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body leave in two writes; with Nagle on, the client's delayed
    # ACK would hold the body back 40 ms on every keep-alive request.
    disable_nagle_algorithm = True
    server_version = "air-golden-mlflow"

    def log_message(self, *args):
        pass

    def _answer(self, status, obj):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _auth(self):
        cfg = self.server.cfg
        given = self.headers.get("Authorization")
        if cfg.basic is not None:
            wanted = "Basic " + base64.b64encode(cfg.basic.encode()).decode()
            return "ok" if given == wanted else ("missing" if given is None else "wrong")
        if cfg.token is None:
            return "none" if given is None else "unexpected"
        return "ok" if given == "Bearer " + cfg.token else ("missing" if given is None else "wrong")

    def _handle(self, method):
        cfg = self.server.cfg
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip() or None
        query = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        entry = {"time": time.time(), "method": method, "path": parts.path, "query": query,
                 "auth": self._auth()}
        if parts.scheme:  # "GET http://host/path": a client that took this server for its proxy
            entry["proxied_to"] = parts.netloc
        status, answer = self._dispatch(method, parts.path, query, content_type, raw, entry)
        entry["status"] = status
        if parts.path.startswith(API) and status == 200:
            with self.server.fault_lock:
                endpoint = parts.path[len(API):]
                if cfg.drop_replies > 0 and cfg.drop_endpoint in (None, endpoint):
                    cfg.drop_replies -= 1
                    entry["dropped"] = True
        if entry.get("dropped"):
            with self.server.log_lock:
                self.server.log.append(entry)
                if cfg.log:
                    with open(cfg.log, "a", encoding="utf-8") as f:
                        f.write(json.dumps(entry) + "\n")
            self.close_connection = True  # done, but the answer never leaves
            return
        if parts.path.startswith("/air-test/"):
            self._answer(status, answer)  # the tests' own look at the store: not part of the log
            return
        with self.server.log_lock:
            self.server.log.append(entry)
            if cfg.log:
                with open(cfg.log, "a", encoding="utf-8") as f:
                    f.write(json.dumps(entry) + "\n")
        self._answer(status, answer)

    def _dispatch(self, method, path, query, content_type, raw, entry):
        cfg = self.server.cfg
        store = self.server.store
        if path == "/air-test/fail-all":  # from now on, every API request fails (a server going bad)
            with self.server.fault_lock:
                cfg.fail_first, cfg.fail_endpoint = 10 ** 9, None
            return 200, {}
        if path == "/air-test/state":
            with store.lock:
                return 200, {"experiments": store.experiments, "runs": store.runs,
                             "artifacts": store.artifacts, "artifact_bytes": store.artifact_bytes,
                             "requests": self.server.log}
        if (cfg.token is not None or cfg.basic is not None) and entry["auth"] != "ok":
            return error(401, "UNAUTHENTICATED", "valid credentials are required")
        if path.startswith(API) or path.startswith(ARTIFACTS):
            endpoint = path[len(API):] if path.startswith(API) else "artifacts"
            with self.server.fault_lock:
                if cfg.fail_first > 0 and (cfg.fail_endpoint in (None, endpoint)):
                    cfg.fail_first -= 1
                    entry["fault"] = True
                    return error(cfg.fail_status, "TEMPORARILY_UNAVAILABLE", "injected fault")
            if cfg.delay_ms and cfg.delay_endpoint in (None, endpoint):
                time.sleep(cfg.delay_ms / 1000.0)
        if path.startswith(ARTIFACTS):
            if method != "PUT":
                return error(404, "ENDPOINT_NOT_FOUND", "%s %s" % (method, path))
            rel = unquote(path[len(ARTIFACTS):])
            m = re.fullmatch(r"([^/]+)/([0-9a-f]+)/artifacts/(.+)", rel)
            with store.lock:
                if not m or m.group(2) not in store.runs:
                    return error(404, "RESOURCE_DOES_NOT_EXIST", "no run for artifact path %s" % rel)
                store.artifacts[rel] = raw.decode("utf-8", "replace")
                # the bytes as they came, to tell a page that arrived whole from a cut one
                store.artifact_bytes[rel] = {"length": len(raw), "sha256": hashlib.sha256(raw).hexdigest(),
                                             "content_type": content_type}
            return 200, {}
        if not path.startswith(API):
            return error(404, "ENDPOINT_NOT_FOUND", "%s %s" % (method, path))
        endpoint = path[len(API):]
        body = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                entry["rejected"] = "body is not JSON"
                return error(400, "MALFORMED_REQUEST", "the body is not JSON")
        entry["body"] = body
        why = check_request(method, endpoint, query, content_type, body)
        if why is not None:
            entry["rejected"] = why
            if why.startswith("no endpoint"):
                return error(404, "ENDPOINT_NOT_FOUND", why)
            return error(400, "INVALID_PARAMETER_VALUE", why)
        with store.lock:
            return HANDLERS[endpoint](self.server.api, query, body)

    def do_GET(self):
        self._handle("GET")

    def do_POST(self):
        self._handle("POST")

    def do_PUT(self):
        self._handle("PUT")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log")
    ap.add_argument("--version", default="2.17.2", choices=["2.17.2", "3.6.1.dev0"])
    ap.add_argument("--token")
    ap.add_argument("--basic", help="USER:PASSWORD that every API request must send (basic auth)")
    ap.add_argument("--fail-first", type=int, default=0)
    ap.add_argument("--fail-status", type=int, default=503)
    ap.add_argument("--fail-endpoint")
    ap.add_argument("--drop-replies", type=int, default=0)
    ap.add_argument("--drop-endpoint")
    ap.add_argument("--delay-ms", type=int, default=0)
    ap.add_argument("--delay-endpoint")
    ap.add_argument("--artifact-root", default="mlflow-artifacts:")
    ap.add_argument("--lifetime", type=float, default=300)
    cfg = ap.parse_args(argv)
    with open(os.path.join(DATA, "mlflow-%s-rest.json" % cfg.version), encoding="utf-8") as f:
        recordings = json.load(f)
    problems = self_check(recordings, cfg.version)
    if problems:
        sys.stderr.write("golden_server: its rules disagree with the recordings:\n  %s\n"
                         % "\n  ".join(problems))
        return 1
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.cfg = cfg
    server.store = Store(cfg.artifact_root, cfg.version)
    server.api = Api(server.store)
    server.log, server.log_lock, server.fault_lock = [], threading.Lock(), threading.Lock()
    threading.Timer(cfg.lifetime, server.shutdown).start()
    tmp = cfg.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(tmp, cfg.port_file)
    server.serve_forever(poll_interval=0.05)
    return 0


if __name__ == "__main__":
    sys.exit(main())
