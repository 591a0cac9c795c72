"""The warm start's interpreter (core/warm/python/air_run_warm.py), imported as
a plain module: how it reads air-run's requests (core/warm/warm_start.cpp
writes them) and the placeholders air-run fills in."""

import os

import pytest

from conftest import REPO_ROOT


@pytest.fixture
def warm(rank_python):
    import air_run_warm

    return air_run_warm


def request(*fields):
    return b"".join(f + b"\0" for f in fields)


def test_a_request_reads_as_air_run_wrote_it(warm):
    parsed = warm._parse_request(request(b"air-run-warm-1", b"4242", b"/work dir", b"1", b"-1", b"0,2,5", b"3",
                                         b"/usr/bin/python3", b"train.py", b"", b"A=1=2", b"EMPTY=",
                                         b"ODD=\xff"))
    assert parsed["parent"] == 4242 and parsed["cwd"] == "/work dir" and parsed["unbuffered"]
    assert parsed["mem_node"] == -1 and parsed["cpus"] == [0, 2, 5]
    assert parsed["argv"] == ["/usr/bin/python3", "train.py", ""]  # an empty argument stays one
    assert parsed["env"]["A"] == "1=2" and parsed["env"]["EMPTY"] == ""
    assert os.fsencode(parsed["env"]["ODD"]) == b"\xff"  # any byte survives, as in os.environ


def test_a_request_of_another_protocol_is_refused(warm):
    with pytest.raises(ValueError):
        warm._parse_request(request(b"air-run-warm-0", b"1", b"/", b"0", b"-1", b"", b"0"))
    with pytest.raises(ValueError):
        warm._parse_request(request(b"air-run-warm-1", b"1"))


def test_the_set_up_error_codes_are_placeholders_air_run_fills_in(warm):
    # Loaded as it is, the codes are 0; the binary writes core/os/spawn_request.hpp's
    # values for these names (warm_start_program).
    assert warm._FAILED_CHDIR == warm._FAILED_AFFINITY == warm._FAILED_MEMPOLICY == 0
    with open(os.path.join(REPO_ROOT, "core", "warm", "python", "air_run_warm.py")) as f:
        text = f.read()
    body = text.split("# ---- air-run embeds this file from the next line on ----\n", 1)[1]
    for name in ("CHDIR", "AFFINITY", "MEMPOLICY"):
        assert body.count("AIR_RUN_FAILED_" + name) == 1, name  # the one line air-run rewrites
        assert "_FAILED_%s = AIR_RUN_FAILED_%s\n" % (name, name) in body
