"""MLflow tracking from Python: @distributed against the loopback tracking
server (tests/mlflow/golden_server.py, held to recorded MLflow exchanges),
the caller's active run as the parent, the Python store protocol, and the
product page's full example with the real mlflow package (skipped where it
is not importable: it is not in Debian)."""

import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import types
import urllib.request

import pytest

import air
from air import _launch
from air._decorator import show_run_link
from conftest import REPO_ROOT, subprocess_env

SERVER = os.path.join(REPO_ROOT, "tests", "mlflow", "golden_server.py")


@pytest.fixture
def tracking_server(tmp_path):
    """A fresh loopback tracking server; yields its base URL."""
    port_file = tmp_path / "port"
    proc = subprocess.Popen([sys.executable, SERVER, "--port-file", str(port_file), "--lifetime", "240",
                             "--log", str(tmp_path / "requests.jsonl")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 15
    while not port_file.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
    if not port_file.exists():
        proc.kill()
        pytest.fail("tracking server did not start: %s" % proc.stderr.read().decode())
    try:
        yield "http://127.0.0.1:%s" % port_file.read_text()
    finally:
        proc.kill()
        proc.wait(timeout=10)


def server_state(uri):
    with urllib.request.urlopen(uri + "/air-test/state", timeout=10) as r:
        return json.load(r)


def rest(uri, endpoint, body):
    req = urllib.request.Request(uri + "/api/2.0/mlflow/" + endpoint, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)


@pytest.fixture
def clean_mlflow_env(monkeypatch):
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME",
                 "AIR_RUN_MLFLOW_RUN_NAME", "AIR_RUN_MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delitem(sys.modules, "mlflow", raising=False)


@air.distributed(num_accelerators=2, accelerator_type="CPU", timeout=60)
def report_tracking():
    return {k: os.environ.get(k) for k in ("MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_ID")}


def test_distributed_call_is_one_run_named_after_the_function(air_run, tracking_server, clean_mlflow_env,
                                                              monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", tracking_server)
    seen = report_tracking.distributed()
    runs = server_state(tracking_server)["runs"]
    assert len(runs) == 1
    (run_id, run), = runs.items()
    assert seen == [{"MLFLOW_TRACKING_URI": tracking_server, "MLFLOW_RUN_ID": run_id,
                     "MLFLOW_EXPERIMENT_ID": run["experiment_id"]}] * 2
    assert run["run_name"] == "report_tracking.distributed"
    assert run["status"] == "FINISHED"
    info = report_tracking.last_summary["mlflow"]
    assert info["run_id"] == run_id and info["tracking"] == "ok"
    link = "%s/#/experiments/%s/runs/%s" % (tracking_server, run["experiment_id"], run_id)
    assert info["link"] == link
    assert "View run at " + link in capsys.readouterr().err  # the line shown under the cell


def test_nested_under_the_callers_run(air_run, tracking_server, clean_mlflow_env, monkeypatch):
    exp = rest(tracking_server, "experiments/create", {"name": "notebook"})["experiment_id"]
    parent = rest(tracking_server, "runs/create", {"experiment_id": exp, "run_name": "cell"})["run"]["info"]["run_id"]
    # A caller with MLflow imported and a run active: the decorator hands it to air-run.
    fake = types.ModuleType("mlflow")
    fake.active_run = lambda: types.SimpleNamespace(info=types.SimpleNamespace(run_id=parent, experiment_id=exp))
    fake.get_tracking_uri = lambda: tracking_server
    monkeypatch.setitem(sys.modules, "mlflow", fake)
    seen = report_tracking.distributed()
    child = seen[0]["MLFLOW_RUN_ID"]
    assert child != parent
    run = server_state(tracking_server)["runs"][child]
    assert run["tags"]["mlflow.parentRunId"] == parent
    assert run["experiment_id"] == exp
    assert report_tracking.last_summary["mlflow"]["parent_run_id"] == parent


def test_mlflow_environment_needs_mlflow_imported_by_the_caller(clean_mlflow_env):
    assert _launch.mlflow_environment("f.distributed") == {"AIR_RUN_MLFLOW_RUN_NAME": "f.distributed"}
    fake = types.ModuleType("mlflow")
    fake.active_run = lambda: None
    fake.get_tracking_uri = lambda: "file:///nowhere"
    sys.modules["mlflow"] = fake
    try:
        # imported, no run active, no URI set: nothing to pass on
        assert _launch.mlflow_environment() == {}
    finally:
        del sys.modules["mlflow"]


def test_run_link_is_displayed_only_under_a_kernel():
    assert show_run_link({"mlflow": None}) is False
    assert show_run_link({"mlflow": {"link": "http://h/#/experiments/1/runs/r", "run_id": "r"}}) is \
        ("IPython" in sys.modules and _has_kernel())


def _has_kernel():
    try:
        from IPython import get_ipython
        return get_ipython() is not None and hasattr(get_ipython(), "kernel")
    except Exception:
        return False


# A test double of the mlflow package, for the protocol between air-run and
# air._mlflow_store only: it records the MlflowClient calls the helper makes.
FAKE_MLFLOW = {
    "mlflow/__init__.py": '''
import atexit, json, os, time, uuid
__version__ = "0.0.0-test-double"
time.sleep(float(os.environ.get("FAKE_MLFLOW_IMPORT_S", "0")))  # the real package takes seconds to import
if os.environ.get("FAKE_MLFLOW_TEARDOWN"):  # the real package's atexit work: half a second
    atexit.register(lambda: (open(os.environ["FAKE_MLFLOW_TEARDOWN"], "w").close(), time.sleep(30)))
class MlflowClient:
    def __init__(self, tracking_uri=None):
        self.path = os.environ["FAKE_MLFLOW_LOG"]
        self._log("client", tracking_uri=tracking_uri)
    def _log(self, call, **kw):
        with open(self.path, "a") as f:
            f.write(json.dumps(dict(kw, call=call, pid=os.getpid(), boot=time.clock_gettime(time.CLOCK_BOOTTIME)))
                    + "\\n")
    def get_experiment_by_name(self, name):
        self._log("get_experiment_by_name", name=name)
        return None
    def create_experiment(self, name, tags=None):
        self._log("create_experiment", name=name, tags=tags)
        return "17"
    def create_run(self, experiment_id, start_time=None, tags=None, run_name=None):
        self._log("create_run", experiment_id=experiment_id, tags=tags, run_name=run_name)
        info = type("I", (), dict(run_id=uuid.uuid4().hex, experiment_id=experiment_id, artifact_uri="file:/a"))
        return type("R", (), dict(info=info))
    def get_run(self, run_id):
        self._log("get_run", run_id=run_id)
        from mlflow.exceptions import MlflowException
        e = MlflowException("Run with id=%s not found" % run_id)
        e.error_code = "RESOURCE_DOES_NOT_EXIST"
        raise e
    def log_batch(self, run_id, metrics=(), params=(), tags=()):
        self._log("log_batch", run_id=run_id, metrics=[m.__dict__ for m in metrics],
                  params=[p.__dict__ for p in params], tags=[t.__dict__ for t in tags])
    def set_terminated(self, run_id, status=None, end_time=None):
        self._log("set_terminated", run_id=run_id, status=status)
        time.sleep(float(os.environ.get("FAKE_MLFLOW_FINISH_S", "0")))  # a store that hangs
    def log_artifact(self, run_id, local_path):
        text = open(local_path, encoding="utf-8").read()
        self._log("log_artifact", run_id=run_id, name=os.path.basename(local_path), text=text,
                  content=json.loads(text) if local_path.endswith(".json") else None)
''',
    "mlflow/entities.py": '''
class Metric:
    def __init__(self, key, value, timestamp, step):
        self.key, self.value, self.timestamp, self.step = key, value, timestamp, step
class Param:
    def __init__(self, key, value):
        self.key, self.value = key, value
class RunTag(Param):
    pass
''',
    "mlflow/exceptions.py": "class MlflowException(Exception):\n    pass\n",
}


def test_python_store_protocol_through_air_run(air_run, tmp_path, clean_mlflow_env):
    for name, text in FAKE_MLFLOW.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(textwrap.dedent(text))
    log = tmp_path / "calls.jsonl"
    env = subprocess_env(FAKE_MLFLOW_LOG=str(log))
    env["PYTHONPATH"] = str(tmp_path) + os.pathsep + env["PYTHONPATH"]
    done = subprocess.run([air_run, "--mlflow-tracking-uri", "sqlite:///m.db", "--mlflow-experiment", "exp",
                           "--python", sys.executable, "--cpu-ranks", "2", "--summary", str(tmp_path / "s.json"),
                           "--no-python", "sh", "-c",
                           # rank 0 records its variables; rank 1 then fails
                           'if [ $RANK = 0 ]; then echo "$MLFLOW_RUN_ID $MLFLOW_EXPERIMENT_ID" > seen.tmp; '
                           'mv seen.tmp seen.0; exec sleep 30; fi; '
                           'while [ ! -e seen.0 ]; do sleep 0.01; done; exit 1'],
                          env=env, cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120)
    assert done.returncode == 1, done.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    names = [c["call"] for c in calls if c["call"] != "client"]
    assert names == ["get_experiment_by_name", "create_experiment", "create_run", "log_batch",
                     "set_terminated", "log_batch", "log_artifact", "log_artifact"]
    assert {c["tracking_uri"] for c in calls if c["call"] == "client"} == {"sqlite:///m.db"}
    create = next(c for c in calls if c["call"] == "create_run")
    assert create["experiment_id"] == "17" and create["run_name"] == "sh"
    run_id = next(c for c in calls if c["call"] == "set_terminated")["run_id"]
    assert (tmp_path / "seen.0").read_text().split() == [run_id, "17"]
    assert next(c for c in calls if c["call"] == "set_terminated")["status"] == "FAILED"
    params = {p["key"]: p["value"] for p in calls[names.index("log_batch") + 1]["params"]}
    assert params["ranks"] == "2" and params["target"] == "sh"
    final = [c for c in calls if c["call"] == "log_batch"][-1]
    assert {m["key"] for m in final["metrics"]} >= {"exit_code", "rank_1/exit_code"}
    artifact = next(c for c in calls if c["call"] == "log_artifact")
    assert artifact["name"] == "air-run-summary.json"
    assert artifact["content"]["mlflow"]["run_id"] == run_id
    # The run's page beside it (drawn without --html too), whole: the very
    # bytes `air-run report` draws from the summary uploaded with it.
    page = [c for c in calls if c["call"] == "log_artifact"][1]
    assert page["name"] == "air-run.html" and page["run_id"] == run_id
    assert not list(tmp_path.glob("*.html"))  # no --html: no page on disk
    (tmp_path / "uploaded.json").write_text(artifact["text"], encoding="utf-8")
    subprocess.run([air_run, "report", str(tmp_path / "uploaded.json"), "--html", str(tmp_path / "redrawn.html")],
                   check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    assert page["text"] == (tmp_path / "redrawn.html").read_text(encoding="utf-8")
    assert page["text"].startswith("<!DOCTYPE html>") and page["text"].rstrip().endswith("</html>")
    summary = json.load(open(str(tmp_path / "s.json")))
    assert summary["mlflow"]["status"] == "FAILED" and summary["mlflow"]["link"] is None
    # One helper process per launch: mlflow is imported once, not at the start and again at the end.
    assert len({c["pid"] for c in calls}) == 1
    assert len([c for c in calls if c["call"] == "client"]) == 1


def write_fake_mlflow(tmp_path):
    for name, text in FAKE_MLFLOW.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(textwrap.dedent(text))


def test_python_store_end_is_cut_short_by_ctrl_c(air_run, tmp_path, clean_mlflow_env):
    write_fake_mlflow(tmp_path)
    log = tmp_path / "calls.jsonl"
    env = subprocess_env(FAKE_MLFLOW_LOG=str(log), FAKE_MLFLOW_FINISH_S="60")
    env["PYTHONPATH"] = str(tmp_path) + os.pathsep + env["PYTHONPATH"]
    proc = subprocess.Popen([air_run, "--mlflow-tracking-uri", "sqlite:///m.db", "--python", sys.executable,
                             "--cpu-ranks", "1", "--no-python", "true"],
                            env=env, cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            universal_newlines=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 60
    while time.time() < deadline and not (log.exists() and "set_terminated" in log.read_text()):
        time.sleep(0.05)
    assert "set_terminated" in log.read_text()
    sent = time.time()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert time.time() - sent < 5, err  # not the store's 60 s
    assert proc.returncode == 0, err  # the run itself succeeded, as with a tracking server
    assert "air-run: warning: MLflow: interrupted" in err
    # the helper went with it
    pid = next(json.loads(line)["pid"] for line in log.read_text().splitlines())
    assert not os.path.exists("/proc/%d" % pid) or "zombie" in open("/proc/%d/status" % pid).read().lower()


def test_python_store_helper_ends_without_the_interpreters_teardown(air_run, tmp_path, clean_mlflow_env):
    # Every write is done when the finish is answered: the helper ends at once
    # (os._exit), so air-run waits neither for mlflow's atexit work nor for
    # its own grace before it kills the helper.
    write_fake_mlflow(tmp_path)
    log = tmp_path / "calls.jsonl"
    teardown = tmp_path / "teardown-ran"
    env = subprocess_env(FAKE_MLFLOW_LOG=str(log), FAKE_MLFLOW_TEARDOWN=str(teardown))
    env["PYTHONPATH"] = str(tmp_path) + os.pathsep + env["PYTHONPATH"]
    done = subprocess.run([air_run, "--mlflow-tracking-uri", "sqlite:///m.db", "--python", sys.executable,
                           "--cpu-ranks", "1", "--summary", str(tmp_path / "s.json"), "--no-python", "true"],
                          env=env, cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.load(open(str(tmp_path / "s.json")))["mlflow"]["status"] == "FINISHED"
    assert not teardown.exists()


def test_python_store_imports_mlflow_without_pandas_and_numpy(tmp_path):
    # mlflow's import goes on without them (as with mlflow-skinny), and they
    # are a fifth of it; importable again afterwards, for a plugin store.
    (tmp_path / "mlflow").mkdir()
    (tmp_path / "mlflow" / "__init__.py").write_text(textwrap.dedent('''
        try:
            import numpy
            HAD_NUMPY = True
        except ImportError:
            HAD_NUMPY = False
        class MlflowClient:
            pass
    '''))
    (tmp_path / "numpy").mkdir()
    (tmp_path / "numpy" / "__init__.py").write_text("")
    env = dict(os.environ, PYTHONPATH=str(tmp_path) + os.pathsep + os.path.join(REPO_ROOT, "python"))
    out = subprocess.run([sys.executable, "-c", textwrap.dedent('''
        from air._mlflow_store import _import_client
        client = _import_client()
        import mlflow, numpy
        print(client.__name__, mlflow.HAD_NUMPY, numpy.__file__ is not None)
    ''')], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["MlflowClient", "False", "True"]


def test_python_store_imports_an_mlflow_that_needs_numpy_whole(tmp_path):
    # A release whose import needs numpy is not broken by the hiding: it is
    # imported again with nothing hidden.
    (tmp_path / "mlflow").mkdir()
    (tmp_path / "mlflow" / "__init__.py").write_text("import numpy\nclass MlflowClient:\n    pass\n")
    (tmp_path / "numpy").mkdir()
    (tmp_path / "numpy" / "__init__.py").write_text("")
    env = dict(os.environ, PYTHONPATH=str(tmp_path) + os.pathsep + os.path.join(REPO_ROOT, "python"))
    out = subprocess.run([sys.executable, "-c", textwrap.dedent('''
        from air._mlflow_store import _import_client
        print(_import_client().__name__)
    ''')], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["MlflowClient"]


def test_python_store_imports_mlflow_while_python_ranks_start(air_run, tmp_path, clean_mlflow_env):
    # mlflow takes 1.5 s to import here: a Python rank's own code starts at
    # once and gets the run when it first looks for it (here: reads
    # MLFLOW_RUN_ID), as a training script's import of torch overlaps it.
    write_fake_mlflow(tmp_path)
    log = tmp_path / "calls.jsonl"
    env = subprocess_env(FAKE_MLFLOW_LOG=str(log), FAKE_MLFLOW_IMPORT_S="1.5")
    env["PYTHONPATH"] = str(tmp_path) + os.pathsep + env["PYTHONPATH"]
    (tmp_path / "rank.py").write_text(textwrap.dedent('''
        import os, time
        began = time.clock_gettime(time.CLOCK_BOOTTIME)  # the clock the fake logs with
        with open("rank.%s" % os.environ["RANK"], "w") as f:
            f.write("%s %f" % (os.environ.get("MLFLOW_RUN_ID", "none"), began))
    '''))
    done = subprocess.run([air_run, "--mlflow-tracking-uri", "sqlite:///m.db", "--python", sys.executable,
                           "--cpu-ranks", "2", "rank.py"],
                          env=env, cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120)
    assert done.returncode == 0, done.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    create = next(c for c in calls if c["call"] == "create_run")
    run_id = next(c for c in calls if c["call"] == "set_terminated")["run_id"]
    for rank in (0, 1):
        seen, began = (tmp_path / ("rank.%d" % rank)).read_text().split()
        assert seen == run_id
        assert float(began) < create["boot"] - 0.5, (began, create["boot"])  # the import alone is 1.5 s


def test_python_store_does_not_nest_under_a_run_that_is_gone(air_run, tmp_path, clean_mlflow_env):
    for name, text in FAKE_MLFLOW.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(textwrap.dedent(text))
    log = tmp_path / "calls.jsonl"
    env = subprocess_env(FAKE_MLFLOW_LOG=str(log), MLFLOW_RUN_ID="0123456789abcdef0123456789abcdef")
    env["PYTHONPATH"] = str(tmp_path) + os.pathsep + env["PYTHONPATH"]
    done = subprocess.run([air_run, "--mlflow-tracking-uri", "sqlite:///m.db", "--mlflow-experiment", "exp",
                           "--python", sys.executable, "--cpu-ranks", "1", "--summary", str(tmp_path / "s.json"),
                           "--no-python", "sh", "-c", 'echo "$MLFLOW_RUN_ID" > seen'],
                          env=env, cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120)
    assert done.returncode == 0, done.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    create = next(c for c in calls if c["call"] == "create_run")
    assert create["experiment_id"] == "17"  # the configured experiment, not a parent's
    assert "mlflow.parentRunId" not in create["tags"]
    run_id = next(c for c in calls if c["call"] == "set_terminated")["run_id"]
    assert (tmp_path / "seen").read_text().split() == [run_id]
    assert "MLFLOW_RUN_ID 0123456789abcdef0123456789abcdef is not a run to nest under" in done.stderr
    summary = json.load(open(str(tmp_path / "s.json")))
    assert summary["mlflow"]["parent_run_id"] is None and summary["mlflow"]["tracking"] == "ok"


# ---------------------------------------------------------------------------- real mlflow

def test_product_page_example_logs_every_loss_point_into_one_child_run(air_run, torch, tmp_path, monkeypatch,
                                                                       clean_mlflow_env):
    if importlib.util.find_spec("mlflow") is None:
        pytest.skip("mlflow is not importable by %s (it is not in Debian; pip install mlflow to run "
                    "this test)" % sys.executable)
    import mlflow
    from mlflow import MlflowClient

    uri = "file:" + str(tmp_path / "mlruns")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3.13+ keeps file stores behind it
    monkeypatch.chdir(tmp_path)
    mlflow.set_tracking_uri(uri)
    data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
    # the ranks import the example module by name, like a notebook's helper module
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([data] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    monkeypatch.syspath_prepend(data)
    import product_page_example as page
    with mlflow.start_run(run_name="notebook-cell") as parent:
        page.run_train.distributed(num_epochs=3, batch_size=1)
    client = MlflowClient(tracking_uri=uri)
    children = client.search_runs([parent.info.experiment_id],
                                  "tags.mlflow.parentRunId = '%s'" % parent.info.run_id)
    assert len(children) == 1
    child = children[0]
    assert child.info.status == "FINISHED"
    assert child.info.run_name == "run_train.distributed"
    history = client.get_metric_history(child.info.run_id, "loss")
    # 5000 samples, 2 ranks, batch size 1: 2500 steps a rank, 3 epochs, both ranks logging
    assert len(history) == 2 * 3 * 2500
    assert len(client.get_metric_history(child.info.run_id, "total_loss")) == 2 * 3
    assert child.data.params["ranks"] == "2"
    # the summary and the run's page, side by side in the run's artifacts (the real file store)
    assert sorted(a.path for a in client.list_artifacts(child.info.run_id)) == ["air-run-summary.json",
                                                                                "air-run.html"]
