"""A legacy GPU type without a count (gpu_type="H100") through the real
air-run, on GPUs faked with AIR_RUN_FAKE_GPUS (nothing uses them). The
ranks' CUDA_VISIBLE_DEVICES stays as the parent set it (unset here), as under
torchrun; the rank count shows the selection."""

import os
import warnings

import pytest

import air

FOUR_H100 = {"AIR_RUN_FAKE_GPUS": "4xNVIDIA H100 80GB HBM3"}


def rank_view():
    return int(os.environ["WORLD_SIZE"]), os.environ.get("CUDA_VISIBLE_DEVICES")


def legacy(**options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return air.distributed(rank_view, timeout=60, env=FOUR_H100, **options)


def test_legacy_model_with_a_count(air_run):
    views = legacy(gpu_type="H100", gpus=2).distributed()
    assert [world for world, _ in views] == [2, 2]
    assert [devices for _, devices in views] == [None, None]  # the parent's (unset), not narrowed


def test_legacy_model_of_another_family_is_refused(air_run):
    with pytest.raises(ValueError) as info:
        legacy(gpu_type=air.GPUType.A10).distributed()
    assert "A10" in str(info.value) and "H100" in str(info.value)


def test_legacy_model_alone_uses_every_gpu_of_the_family(air_run):
    views = legacy(gpu_type="H100").distributed()
    assert [world for world, _ in views] == [4, 4, 4, 4]
    assert views[0][1] is None


def test_new_type_and_count_still_work_on_fake_gpus(air_run):
    views = air.distributed(rank_view, timeout=60, env=FOUR_H100, num_accelerators=3,
                            accelerator_type=air.AcceleratorType.GPU_8xH100)
    with pytest.raises(ValueError) as info:  # 8 asked, 4 there
        views.distributed()
    assert "GPU_8xH100" in str(info.value)
