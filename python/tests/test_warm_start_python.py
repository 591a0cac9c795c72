"""The warm start's interpreter (core/warm/python/air_run_warm.py), imported as
a plain module: how it reads air-run's requests (core/warm/warm_start.cpp
writes them) and the placeholders air-run fills in."""

import os
import sys

import pytest

from conftest import REPO_ROOT


@pytest.fixture
def warm(rank_python):
    import air_run_warm

    return air_run_warm


def request(*fields):
    return b"".join(f + b"\0" for f in fields)


def test_a_request_reads_as_air_run_wrote_it(warm):
    parsed = warm._parse_request(request(b"air-run-warm-2", b"4242", b"/work dir", b"1", b"-1", b"0,2,5", b"3",
                                         b"/usr/bin/python3", b"train.py", b"", b"3", b"A=1=2", b"EMPTY=",
                                         b"ODD=\xff", b"GONE"))
    assert parsed["parent"] == 4242 and parsed["cwd"] == "/work dir" and parsed["unbuffered"]
    assert parsed["mem_node"] == -1 and parsed["cpus"] == [0, 2, 5]
    assert parsed["argv"] == ["/usr/bin/python3", "train.py", ""]  # an empty argument stays one
    assert parsed["env"]["A"] == "1=2" and parsed["env"]["EMPTY"] == ""
    assert os.fsencode(parsed["env"]["ODD"]) == b"\xff"  # any byte survives, as in os.environ
    assert "GONE" in parsed["env"] and parsed["env"]["GONE"] is None  # unset, not set empty
    assert len(parsed["env"]) == 4


def test_a_request_of_another_protocol_is_refused(warm):
    with pytest.raises(ValueError):
        warm._parse_request(request(b"air-run-warm-0", b"1", b"/", b"0", b"-1", b"", b"0"))
    with pytest.raises(ValueError):
        warm._parse_request(request(b"air-run-warm-2", b"1"))
    with pytest.raises(ValueError):  # the whole environment, as version 1 sent it
        warm._parse_request(request(b"air-run-warm-1", b"1", b"/", b"0", b"-1", b"", b"1", b"p", b"A=1"))
    with pytest.raises(ValueError):  # no count of the variables set
        warm._parse_request(request(b"air-run-warm-2", b"1", b"/", b"0", b"-1", b"", b"1", b"p"))


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


def test_a_ranks_environment_is_set_by_what_it_changes(warm, monkeypatch):
    # Only the names a request changes, and those the zygote changed itself
    # since it started, are looked at: the cost is the rank's own variables',
    # not the environment's size. The C calls are counted (and kept off the
    # real environment); os.environ ends as the rank's.
    calls = []
    monkeypatch.setattr(os, "putenv", lambda k, v: calls.append(("set", os.fsdecode(k))))
    monkeypatch.setattr(os, "unsetenv", lambda k: calls.append(("unset", os.fsdecode(k))))
    saved = dict(os.environ)
    try:
        os.environ["AIR_TEST_KEEP"] = "same"
        os.environ["AIR_TEST_DROP"] = "gone"
        os.environ["AIR_TEST_CHANGE"] = "old"
        os.environ["AIR_TEST_SAME_AGAIN"] = "v"
        start = dict(warm._environ_data())
        monkeypatch.setattr(warm, "_START_ENVIRONMENT", start)
        # What the zygote did after it started: a cap of its own, a variable an import set.
        os.environ["AIR_TEST_CAP"] = "1"
        os.environ["AIR_TEST_KEEP"] = "changed by an import"
        monkeypatch.setattr(warm, "_ZYGOTE_CHANGED", warm._zygote_changes(start, warm._environ_data()))
        assert warm._ZYGOTE_CHANGED == {b"AIR_TEST_CAP", b"AIR_TEST_KEEP"}
        expected = {os.fsdecode(k): os.fsdecode(v) for k, v in start.items() if k != b"AIR_TEST_DROP"}
        expected.update(AIR_TEST_CHANGE="new", AIR_TEST_NEW="1", AIR_TEST_ODD=os.fsdecode(b"\xff"))
        del calls[:]
        warm._set_environment({"AIR_TEST_CHANGE": "new", "AIR_TEST_NEW": "1", "AIR_TEST_DROP": None,
                               "AIR_TEST_SAME_AGAIN": "v", "AIR_TEST_ODD": os.fsdecode(b"\xff")})
        assert dict(os.environ) == expected
        assert sorted(calls) == [("set", "AIR_TEST_CHANGE"), ("set", "AIR_TEST_KEEP"), ("set", "AIR_TEST_NEW"),
                                 ("set", "AIR_TEST_ODD"), ("unset", "AIR_TEST_CAP"), ("unset", "AIR_TEST_DROP")]
    finally:
        for name in list(os.environ):
            if name not in saved:
                del os.environ[name]
        os.environ.update(saved)


def test_the_zygotes_own_changes_are_none_when_it_changed_nothing(warm):
    start = {b"A": b"1", b"B": b"2"}
    assert warm._zygote_changes(start, dict(start)) == frozenset()
    assert warm._zygote_changes(start, {b"A": b"1", b"C": b"3"}) == {b"B", b"C"}
    assert warm._zygote_changes(start, {b"A": b"9", b"B": b"2"}) == {b"A"}


def test_a_rank_reseeds_torchs_cpu_generator_not_cuda(warm, monkeypatch):
    # Fresh, torch seeds its default CPU generator from entropy at import;
    # forked, every rank had the zygote's state (the same numbers on every
    # rank and attempt). torch.seed() would also seed CUDA's generators,
    # which a fresh interpreter leaves at their default seed.
    import types

    seeded = []

    class Generator:
        def seed(self):
            seeded.append("cpu")

    fake = types.ModuleType("torch")
    fake.default_generator = Generator()
    fake.seed = lambda: seeded.append("torch.seed")
    monkeypatch.setitem(sys.modules, "torch", fake)
    warm._reseed()
    assert seeded == ["cpu"]
