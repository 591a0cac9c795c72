"""air.report(): one JSON value to $AIR_RESULT_FILE, atomically."""

import json
import os

import pytest

import air


def test_writes_json(tmp_path, monkeypatch):
    target = tmp_path / "result.json"
    monkeypatch.setenv("AIR_RESULT_FILE", str(target))
    assert air.report({"loss": 0.5, "steps": [1, 2]}) is True
    assert json.loads(target.read_text()) == {"loss": 0.5, "steps": [1, 2]}
    assert air.report("second") is True  # a later report replaces the value
    assert json.loads(target.read_text()) == "second"
    assert os.listdir(str(tmp_path)) == ["result.json"]


def test_replaces_atomically(tmp_path, monkeypatch):
    target = tmp_path / "result.json"
    target.write_text('"old"')
    monkeypatch.setenv("AIR_RESULT_FILE", str(target))
    seen = []
    real_replace = os.replace

    def checking_replace(src, dst):
        # At the moment of the rename the destination still holds the old value
        # and the complete new one sits in a temporary file of the same directory.
        seen.append((os.path.dirname(src), open(dst).read(), open(src).read()))
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", checking_replace)
    air.report([1, 2, 3])
    assert seen == [(str(tmp_path), '"old"', "[1, 2, 3]")]
    assert target.read_text() == "[1, 2, 3]"


def test_failed_write_leaves_old_value_and_no_temp_file(tmp_path, monkeypatch):
    target = tmp_path / "result.json"
    target.write_text('"old"')
    monkeypatch.setenv("AIR_RESULT_FILE", str(target))

    def failing_replace(src, dst):
        raise OSError("disk on fire")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk on fire"):
        air.report("new")
    assert target.read_text() == '"old"'
    assert os.listdir(str(tmp_path)) == ["result.json"]


def test_outside_air_run_warns_and_does_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv("AIR_RESULT_FILE", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.warns(RuntimeWarning, match=r"air.report\(\) called outside air-run"):
        assert air.report(1) is False
    assert os.listdir(str(tmp_path)) == []


def test_nan_is_refused(tmp_path, monkeypatch):
    target = tmp_path / "result.json"
    monkeypatch.setenv("AIR_RESULT_FILE", str(target))
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        air.report({"loss": float("nan")})
    assert not target.exists()


def test_not_json_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("AIR_RESULT_FILE", str(tmp_path / "result.json"))
    with pytest.raises(TypeError, match="not JSON serializable"):
        air.report({1, 2})
    assert os.listdir(str(tmp_path)) == []
