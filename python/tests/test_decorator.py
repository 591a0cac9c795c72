"""@distributed options, legacy names, placement flags; no launch needed."""

import pickle
import warnings

import pytest

import air
from air import _launch
from air._decorator import DistributedFunction


@air.distributed(num_accelerators=2, timeout=60)
def module_level(x):
    return x * 2


def test_plain_call_runs_locally():
    assert module_level(21) == 42
    assert module_level.__name__ == "module_level"
    assert module_level.num_accelerators == 2
    assert module_level.timeout == 60


def test_defaults_and_bare_decorator():
    @air.distributed
    def bare():
        return "here"

    assert isinstance(bare, DistributedFunction)
    assert bare() == "here"
    assert bare.num_accelerators is None
    assert bare.accelerator_type is None
    assert bare.timeout == 10800


def test_legacy_gpus_warns_and_maps():
    with pytest.warns(FutureWarning, match="`gpus` is deprecated; use `num_accelerators`"):
        @air.distributed(gpus=2)
        def f():
            pass
    assert f.num_accelerators == 2


def test_legacy_gpu_type_warns_twice_for_old_value():
    with pytest.warns(FutureWarning) as record:
        @air.distributed(gpu_type="H100")
        def f():
            pass
    messages = [str(w.message) for w in record]
    assert messages == ["`gpu_type` is deprecated; use `accelerator_type` instead",
                        "accelerator type 'H100' is deprecated; use the GPU_<n>x<MODEL> form, "
                        "e.g. 'GPU_8xH100'"]
    assert f.accelerator_type == "H100"


def test_legacy_value_under_new_name_warns():
    with pytest.warns(FutureWarning, match="accelerator type 'A10' is deprecated"):
        air.distributed(accelerator_type="A10")


def test_new_names_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        air.distributed(num_accelerators=8, accelerator_type="GPU_8xH100")


def test_enum_like_accelerator_type():
    class GPUType:
        value = "GPU_1xA10"

    assert air.distributed(accelerator_type=GPUType())(len).accelerator_type == "GPU_1xA10"


@pytest.mark.parametrize("kwargs, error, text", [
    (dict(gpus=2, num_accelerators=2), TypeError,
     "pass either num_accelerators or its deprecated name gpus, not both"),
    (dict(num_accelerators=0), ValueError, "num_accelerators must be at least 1, got 0"),
    (dict(num_accelerators="2"), TypeError, "num_accelerators must be a positive int, not '2'"),
    (dict(timeout=0), ValueError, "timeout must be a positive number of seconds"),
    (dict(timeout=True), TypeError, "timeout must be a number of seconds"),
])
def test_bad_options(kwargs, error, text):
    with pytest.raises(error) as info:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            air.distributed(**kwargs)(len)
    assert str(info.value).startswith(text)


@pytest.mark.parametrize("timeout, text", [
    (None, "none"), (30, "30"), (2.1, "3"), ("90m", "90m"), ("none", "none")])
def test_timeout_text(timeout, text):
    assert _launch.format_timeout(timeout) == text


def test_module_level_function_pickles_by_name():
    assert pickle.loads(pickle.dumps(module_level)) is module_level


def test_placement_on_gpu_machine(fake_air_run):
    binary = fake_air_run(gpus=2)
    assert _launch.placement_flags(binary, {}, None, None) == []
    assert _launch.placement_flags(binary, {}, 2, None) == ["-n", "2"]
    assert _launch.placement_flags(binary, {}, 2, "GPU_2xH200") == [
        "-n", "2", "--accelerator-type", "GPU_2xH200"]


def test_placement_on_cpu_machine(fake_air_run):
    binary = fake_air_run(gpus=0)
    assert _launch.placement_flags(binary, {}, None, None) == ["--cpu-ranks", "1"]
    assert _launch.placement_flags(binary, {}, 2, None) == ["--cpu-ranks", "2"]
    assert _launch.placement_flags(binary, {}, 2, "cpu") == [
        "--accelerator-type", "CPU", "--cpu-ranks", "2"]
    # A GPU type is passed on, for air-run to refuse with its own message.
    assert _launch.placement_flags(binary, {}, None, "GPU_8xH100") == [
        "--accelerator-type", "GPU_8xH100"]


def test_spec_error_becomes_value_error(fake_air_run, monkeypatch):
    """Exit 2 with `air-run: error:` is a ValueError carrying air-run's message."""
    monkeypatch.setenv("AIR_RUN_BINARY", fake_air_run(gpus=0))

    @air.distributed(num_accelerators=2)
    def f():
        pass

    with pytest.raises(ValueError) as info:
        f.distributed()
    assert str(info.value) == "air-run: fake air-run cannot launch"
