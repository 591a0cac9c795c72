"""Finding air-run and checking its version."""

import os
import stat

import pytest

import air
from air import _binary


def test_explicit_binary_must_exist(monkeypatch):
    monkeypatch.setenv("AIR_RUN_BINARY", "/nonexistent/air-run")
    with pytest.raises(RuntimeError, match="AIR_RUN_BINARY=/nonexistent/air-run is not an "
                                           "executable file"):
        _binary.find_air_run()


def test_explicit_binary_wins(fake_air_run, monkeypatch):
    path = fake_air_run()
    monkeypatch.setenv("AIR_RUN_BINARY", path)
    assert _binary.find_air_run() == path


def test_path_then_repo_build(fake_air_run, monkeypatch, tmp_path):
    monkeypatch.delenv("AIR_RUN_BINARY", raising=False)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "air-run").symlink_to(fake_air_run())
    monkeypatch.setenv("PATH", str(bindir))
    assert _binary.find_air_run() == str(bindir / "air-run")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    built = os.path.join(_binary.REPO_ROOT, "build", "cli", "air-run")
    if os.access(built, os.X_OK):
        assert _binary.find_air_run() == built
    else:
        with pytest.raises(RuntimeError, match="the air-run binary was not found: set "
                                               "AIR_RUN_BINARY"):
            _binary.find_air_run()


def test_matching_version_passes(fake_air_run):
    _binary.check_version(fake_air_run(version=air.__version__))


def test_version_mismatch_names_both(fake_air_run, monkeypatch):
    path = fake_air_run(version="9.9.9")
    monkeypatch.delenv("AIR_SKIP_VERSION_CHECK", raising=False)
    with pytest.raises(RuntimeError) as info:
        _binary.check_version(path)
    message = str(info.value)
    assert message.startswith("air: version mismatch: the air Python package is 0.1.0 (")
    assert "but the air-run binary is 9.9.9 (%s)" % path in message
    assert os.path.dirname(air.__file__) in message
    monkeypatch.setenv("AIR_SKIP_VERSION_CHECK", "1")
    _binary.check_version(path)


def test_version_mismatch_stops_a_call(fake_air_run, monkeypatch):
    monkeypatch.setenv("AIR_RUN_BINARY", fake_air_run(version="0.2.0"))
    monkeypatch.delenv("AIR_SKIP_VERSION_CHECK", raising=False)

    @air.distributed(num_accelerators=2)
    def f():
        return 1

    with pytest.raises(RuntimeError, match="version mismatch: the air Python package is 0.1.0"):
        f.distributed()


def test_unrecognised_version_output(fake_air_run):
    path = fake_air_run(version_output="torchrun 2.0")
    with pytest.raises(RuntimeError, match="--version did not print 'air-run X.Y.Z'"):
        _binary.check_version(path)


def test_list_gpus(fake_air_run):
    info = _binary.list_gpus(fake_air_run(gpus=2))
    assert info["accelerator_type"] == "GPU_2xH200"
    assert _binary.gpu_count(info) == 2
    assert _binary.gpu_count(_binary.list_gpus(fake_air_run(gpus=0))) == 0


def test_packaged_binary_comes_before_path(fake_air_run, monkeypatch, tmp_path):
    """The wheel's own binary (air/bin/air-run) is found first, so a pip
    install needs no configuration and never picks up another version."""
    monkeypatch.delenv("AIR_RUN_BINARY", raising=False)
    package = tmp_path / "site-packages" / "air"
    (package / "bin").mkdir(parents=True)
    (package / "bin" / "air-run").symlink_to(fake_air_run())
    monkeypatch.setattr(_binary, "_PACKAGE_DIR", str(package))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "air-run").symlink_to(fake_air_run())
    monkeypatch.setenv("PATH", str(bindir))
    assert _binary.packaged_binary() == str(package / "bin" / "air-run")
    assert _binary.find_air_run() == str(package / "bin" / "air-run")


def test_not_found_outside_a_checkout_names_no_build_path(monkeypatch, tmp_path):
    """An installed package (no checkout around it) suggests installing the
    binary, not a build directory that cannot exist."""
    monkeypatch.delenv("AIR_RUN_BINARY", raising=False)
    monkeypatch.setattr(_binary, "_PACKAGE_DIR", str(tmp_path / "lib" / "site-packages" / "air"))
    monkeypatch.setattr(_binary, "REPO_ROOT", str(tmp_path / "lib"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(RuntimeError) as info:
        _binary.find_air_run()
    message = str(info.value)
    assert message == ("air: the air-run binary was not found: set AIR_RUN_BINARY to its path or "
                       "put air-run on PATH; the air-run wheel and the .deb install it (see "
                       "docs/install.md)")
