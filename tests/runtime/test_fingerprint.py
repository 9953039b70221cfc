"""rt_lib.runtime.fingerprint: the numeric platform, and the comparison it chooses."""

import json
import os
import subprocess
import sys

import pytest

from rt_lib.runtime import fingerprint as fp


def test_kernel_hashes_repeat_and_name_each_kernel():
    a, b = fp.kernel_hashes(), fp.kernel_hashes()
    assert a == b
    assert set(a) == {"matmul", "softmax", "layer_norm", "adamw"}


def test_another_kernel_path_gives_another_fingerprint():
    """ATen's scalar kernels (what another CPU's capability amounts to) change the hashes: the
    fingerprint sees a platform that would not reproduce the bits."""
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default"}
    other = json.loads(subprocess.run([sys.executable, "-m", "rt_lib.runtime.fingerprint", "--json"],
                                      env=env, capture_output=True, text=True, check=True).stdout)
    here = fp.fingerprint()
    assert other["aten_capability"] == "DEFAULT"
    assert any("kernel results differ" in d for d in fp.differences(other, here))


def test_differences_name_what_keeps_two_platforms_apart():
    here = fp.fingerprint()
    assert fp.differences(here, json.loads(json.dumps(here))) == []
    moved = {**here, "kernels": {**here["kernels"], "softmax": "0" * 16}}
    assert fp.differences(moved, here) == ["kernel results differ: softmax"]
    # the CPU's name only describes: a platform whose kernels agree still matches
    renamed = {**here, "cpu": {**here["cpu"], "vendor": "GenuineIntel"}}
    assert fp.differences(renamed, here) == []
    assert fp.differences({**here, "torch": "2.0"}, here) == [f"torch: 2.0 here, {here['torch']} recorded"]


def test_the_comparison_is_strict_only_where_every_recording_matches():
    here = fp.fingerprint()
    other = {**here, "kernels": {**here["kernels"], "matmul": "f" * 16}}
    assert fp.choose_mode(here, {"01_a": here, "02_b": here})[0] == "strict"
    mode, why = fp.choose_mode(here, {"01_a": here, "02_b": other})
    assert (mode, "02_b" in why, "01_a" in why) == ("portable", True, False)
    mode, why = fp.choose_mode(here, {"01_a": here, "02_b": None})
    assert mode == "portable" and "02_b" in why
    assert fp.choose_mode(here, {"01_a": here}, "portable") == ("portable", "RT_PLATFORM=portable")
    assert fp.choose_mode(here, {"01_a": other}, "strict")[0] == "strict"
    with pytest.raises(ValueError, match="RT_PLATFORM must be one of"):
        fp.choose_mode(here, {}, "exact")


def test_every_committed_notebook_carries_the_fingerprint_it_was_recorded_under():
    recorded = fp.recorded()
    assert recorded and all(recorded.values()), [n for n, f in recorded.items() if not f]
    assert len({json.dumps({k: f[k] for k in fp.DECIDING}, sort_keys=True)
                for f in recorded.values()}) == 1  # one recording platform for all
