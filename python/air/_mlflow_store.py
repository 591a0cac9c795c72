"""air-run's bridge to MLflow stores that only the mlflow package can write.

air-run talks to tracking servers (http, https, Databricks) over REST itself.
Every other tracking URI (``file:``, ``sqlite:``, a plain path, database and
plugin stores) goes through this module, run by air-run with the launch's
interpreter, once per launch::

    python -m air._mlflow_store serve

It imports mlflow at once (seconds), while air-run starts the ranks, then
reads requests from stdin, one JSON object per line, each with an "action":
"start" (see start()), later "finish" (see finish()). Each answer is one line
on stdout: ANSWER_MARK and a JSON object ({"error": ...} when the step failed
as a whole; "no_mlflow": true when mlflow cannot be imported). It ends after
the finish, or when its stdin closes (air-run is gone). Exit codes: 0, 2 bad
usage, 3 mlflow cannot be imported.
"""

import json
import os
import sys

EXIT_NO_MLFLOW = 3
ANSWER_MARK = "@air-answer "  # other lines on stdout (a plugin's print) are no answer


def _say(obj):
    sys.stdout.write(ANSWER_MARK + json.dumps(obj) + "\n")
    sys.stdout.flush()


def _why(exc):
    return "%s: %s" % (type(exc).__name__, str(exc).strip().splitlines()[0] if str(exc).strip() else "")


def start(client, req):
    """Finds or creates the experiment (the parent's when nested), creates
    the run with its tags and logs its params.

    Request: tracking_uri, experiment_name, experiment_id, parent_run_id,
    run_name, start_time (unix ms), tags and params ([{"key", "value"}]).
    A parent run that is gone, deleted or not RUNNING is not nested under.
    Answer: experiment_id, run_id, artifact_uri, parent_run_id (nested under,
    "" when top-level), warnings, errors.
    """
    from mlflow.entities import Param
    from mlflow.exceptions import MlflowException

    experiment_id = req.get("experiment_id") or ""
    name = req.get("experiment_name") or ""
    tags = {kv["key"]: kv["value"] for kv in req.get("tags") or []}
    parent = req.get("parent_run_id") or ""
    warnings = []
    if parent:
        why_not, parent_experiment = _why_not_nest(client, parent, MlflowException)
        if why_not:
            warnings.append("MLFLOW_RUN_ID %s is not a run to nest under: it %s; the launch's run is a "
                            "top-level one" % (parent, why_not))
            parent = ""
            tags.pop("mlflow.parentRunId", None)
        else:
            experiment_id = parent_experiment
    if not parent and name:
        found = client.get_experiment_by_name(name)
        if found is None:
            try:
                experiment_id = client.create_experiment(name, tags={"air.created_by": "air-run"})
            except MlflowException:
                found = client.get_experiment_by_name(name)  # created meanwhile by another launch
                if found is None:
                    raise
                experiment_id = found.experiment_id
        else:
            experiment_id = found.experiment_id
    if not experiment_id:
        experiment_id = "0"  # MLflow's Default experiment
    run = client.create_run(experiment_id, start_time=req.get("start_time") or None, tags=tags,
                            run_name=req.get("run_name") or None)
    errors = []
    params = [Param(kv["key"], kv["value"]) for kv in req.get("params") or []]
    if params:
        try:
            client.log_batch(run.info.run_id, params=params)
        except Exception as e:  # the run exists: tracking goes on without them
            errors.append("params not logged: " + _why(e))
    return {"experiment_id": run.info.experiment_id, "run_id": run.info.run_id,
            "artifact_uri": run.info.artifact_uri, "parent_run_id": parent, "warnings": warnings,
            "errors": errors}


def _why_not_nest(client, run_id, MlflowException):
    """(why the run cannot be a parent, "") or ("", its experiment id): a run
    that is gone, deleted or no longer RUNNING is a leftover of another launch."""
    try:
        run = client.get_run(run_id)
    except MlflowException as e:
        code = getattr(e, "error_code", "")
        if code in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE") or "not found" in str(e).lower():
            return "does not exist", ""
        raise
    if getattr(run.info, "lifecycle_stage", "active") == "deleted":
        return "is deleted", ""
    status = getattr(run.info, "status", "RUNNING")
    if status != "RUNNING":
        return "is %s" % status, ""
    return "", run.info.experiment_id


def finish(client, req):
    """Sets the final status, logs metrics and tags, uploads the artifact.

    Request: tracking_uri, run_id, status ("" leaves it), end_time (unix ms),
    metrics ([{"key", "value", "timestamp", "step"}]), tags, artifact
    ({"name", "file"}, optional), more_artifacts ([{"name", "file"}], logged
    beside it: the run's HTML page). Answer: status_set, artifact_path,
    more_paths, errors.
    """
    from mlflow.entities import Metric, RunTag

    run_id = req["run_id"]
    out = {"status_set": "", "artifact_path": "", "more_paths": [], "errors": []}
    status = req.get("status") or ""
    if status:
        try:
            client.set_terminated(run_id, status=status, end_time=req.get("end_time") or None)
            out["status_set"] = status
        except Exception as e:
            out["errors"].append("status %s not set: %s" % (status, _why(e)))
    metrics = [Metric(m["key"], m["value"], m["timestamp"], m["step"]) for m in req.get("metrics") or []]
    tags = [RunTag(kv["key"], kv["value"]) for kv in req.get("tags") or []]
    if metrics or tags:
        try:
            client.log_batch(run_id, metrics=metrics, tags=tags)
        except Exception as e:
            out["errors"].append("metrics not logged: " + _why(e))
    artifact = req.get("artifact")
    if artifact:
        try:
            client.log_artifact(run_id, artifact["file"])
            out["artifact_path"] = artifact["name"]
        except Exception as e:
            out["errors"].append("%s not uploaded: %s" % (artifact["name"], _why(e)))
    for more in req.get("more_artifacts") or []:
        try:
            client.log_artifact(run_id, more["file"])
            out["more_paths"].append(more["name"])
        except Exception as e:
            out["errors"].append("%s not uploaded: %s" % (more["name"], _why(e)))
    return out


# Not importable while mlflow itself is imported: its tracking client needs
# none of them (mlflow-skinny, a supported install, comes without them, so
# mlflow's import goes on without them), and they were a fifth of the import,
# the longest step of a file or database store's launch (pandas and numpy:
# 0.5 to 0.7 s of 2.8 s on a busy 2-core machine). Importable again after it,
# for a plugin store that wants them.
_NOT_FOR_THE_CLIENT = ("pandas", "numpy", "pyarrow", "scipy", "sklearn")


class _HideFromImport:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.partition(".")[0] in _NOT_FOR_THE_CLIENT:
            raise ModuleNotFoundError("hidden while mlflow is imported: %s" % name, name=name)
        return None


def _import_client():
    """mlflow.MlflowClient, imported with _NOT_FOR_THE_CLIENT hidden, unless
    one of them is imported already (then hiding it gains nothing). A release
    of mlflow whose import needs one of them is imported again, whole."""
    if not any(name in sys.modules for name in _NOT_FOR_THE_CLIENT):
        sys.meta_path.insert(0, _HideFromImport)
        try:
            from mlflow import MlflowClient
            return MlflowClient
        except ImportError:
            for name in [n for n in sys.modules if n == "mlflow" or n.startswith("mlflow.")]:
                del sys.modules[name]
        finally:
            sys.meta_path.remove(_HideFromImport)
    from mlflow import MlflowClient
    return MlflowClient


def serve(requests):
    """Answers the requests of one launch (lines of JSON from `requests`)
    with one MlflowClient, made for the first request's tracking_uri."""
    try:
        MlflowClient = _import_client()
    except Exception as e:  # ImportError, or a broken installation
        for _ in requests:  # answered when asked, so air-run tells it in its own words
            _say({"error": _why(e), "no_mlflow": True})
            break
        return EXIT_NO_MLFLOW
    client = None
    for line in requests:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            if client is None:
                client = MlflowClient(tracking_uri=req["tracking_uri"])
            action = req.get("action")
            if action not in ("start", "finish"):
                raise ValueError("unknown action %r" % (action,))
            _say((start if action == "start" else finish)(client, req))
        except Exception as e:
            _say({"error": _why(e)})
            action = None
        if action == "finish":
            break
    return 0


def main(argv):
    if len(argv) != 2 or argv[1] != "serve":
        sys.stderr.write("usage: python -m air._mlflow_store serve  (requests on stdin, one JSON object a line)\n")
        return 2
    return serve(sys.stdin)


if __name__ == "__main__":
    code = main(sys.argv)
    # Every write returned before its answer went out. The interpreter's own
    # teardown with mlflow loaded (its atexit handlers, SQLAlchemy's pools)
    # took half a second, which air-run, waiting for this process to end,
    # would add to every launch.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
