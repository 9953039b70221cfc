"""The TinyStories loader: splitting, held-out stories, where data comes from, missing data."""

import pytest

from rt_lib.tasks.stories import ENV_VAR, SEPARATOR, load_tinystories, read_stories, split_stories


def write_dump(path, stories):
    path.write_text(f"\n{SEPARATOR}\n".join(stories) + f"\n{SEPARATOR}\n", encoding="utf-8")


def test_split_stories_on_the_separator():
    text = f"Once upon a time.\n\nThe end.{SEPARATOR}\n  Tom ran.  {SEPARATOR}{SEPARATOR}\n"
    assert split_stories(text) == ["Once upon a time.\n\nThe end.", "Tom ran."]


def test_folder_reads_every_txt_in_name_order(tmp_path):
    write_dump(tmp_path / "b.txt", ["third"])
    write_dump(tmp_path / "a.txt", ["first", "second"])
    (tmp_path / "notes.md").write_text("ignored")
    assert read_stories(tmp_path) == ["first", "second", "third"]


def test_held_out_stories_are_disjoint_and_seeded(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    stories = [f"story {i}" for i in range(40)]
    write_dump(tmp_path / "s.txt", stories)
    a = load_tinystories(tmp_path, valid_fraction=0.1, split_seed=3)
    assert len(a.valid) == 4 and len(a.train) == 36
    assert sorted(a.train + a.valid) == sorted(stories)
    assert load_tinystories(tmp_path, valid_fraction=0.1, split_seed=3) == a
    assert load_tinystories(tmp_path, valid_fraction=0.1, split_seed=4).valid != a.valid
    small = load_tinystories(tmp_path, max_stories=10)
    assert len(small.train) + len(small.valid) == 10 and len(small.valid) == 1


def test_environment_variable_is_the_default_path(tmp_path, monkeypatch):
    write_dump(tmp_path / "s.txt", ["one", "two", "three"])
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    data = load_tinystories()
    assert data.source == str(tmp_path) and len(data.train) + len(data.valid) == 3


def test_missing_data_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    with pytest.raises(FileNotFoundError, match=ENV_VAR):
        load_tinystories()
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_tinystories(tmp_path / "nowhere")


def test_bad_split_parameters(tmp_path):
    write_dump(tmp_path / "s.txt", ["one", "two"])
    with pytest.raises(ValueError, match="valid_fraction"):
        load_tinystories(tmp_path, valid_fraction=1.0)
    with pytest.raises(ValueError, match="max_stories"):
        load_tinystories(tmp_path, max_stories=1)


def test_a_dump_without_separators_is_one_story_per_line():
    text = "Lily found a needle.\n\nShe was happy.\nTom had a ball.\nThe end came.\n"
    assert split_stories(text) == ["Lily found a needle.\n\nShe was happy.", "Tom had a ball.",
                                   "The end came."]


def test_a_story_in_two_dumps_is_kept_once(tmp_path):
    write_dump(tmp_path / "a.txt", ["Tom ran.", "Sue  sat."])
    write_dump(tmp_path / "b.txt", ["Sue sat.", "Max hid."])
    assert read_stories(tmp_path) == ["Tom ran.", "Sue  sat.", "Max hid."]


class FakeHub:
    """Stands in for the `datasets` package: records the call, serves two splits."""

    def __init__(self, fail: bool = False):
        self.calls, self.fail = [], fail

    def load_dataset(self, name, cache_dir=None):
        self.calls.append((name, cache_dir))
        if self.fail:
            raise ConnectionError("no network")
        return {"train": {"text": ["Tom ran.", " ", "Sue sat.", "Max hid."]},
                "validation": {"text": ["Bob sang."]}}


def test_hub_gives_its_own_splits_and_wins_over_the_environment(tmp_path, monkeypatch):
    import sys

    from rt_lib.tasks.stories import HUB_NAME

    hub = FakeHub()
    monkeypatch.setitem(sys.modules, "datasets", hub)
    write_dump(tmp_path / "s.txt", ["local one", "local two"])
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    data = load_tinystories(from_hub=True, cache_dir=tmp_path / "cache", max_stories=2)
    assert hub.calls == [(HUB_NAME, str(tmp_path / "cache"))]
    assert data.source == HUB_NAME
    assert data.train == ["Tom ran.", "Sue sat."] and data.valid == ["Bob sang."]
    assert load_tinystories(tmp_path, from_hub=True).source == str(tmp_path)  # a path still wins


def test_hub_failures_say_how_to_get_the_data(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "datasets", FakeHub(fail=True))
    with pytest.raises(FileNotFoundError, match=f"no network.*{ENV_VAR}"):
        load_tinystories(from_hub=True)
    monkeypatch.setitem(sys.modules, "datasets", None)  # not installed
    with pytest.raises(FileNotFoundError, match="needs the `datasets` package"):
        load_tinystories(from_hub=True)


def _sourced_path(cwd, env):
    import subprocess
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "scripts" / "data_env.sh"
    out = subprocess.run(["bash", "-c", f"source '{script}' && printf %s \"$RT_TINYSTORIES\""],
                         cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return out.stdout


def test_the_scripts_find_the_shared_excerpts_above_the_checkout(tmp_path):
    import os

    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    repo = tmp_path / "ci" / "clone"
    repo.mkdir(parents=True)
    assert _sourced_path(repo, env) == ""  # nothing anywhere: left unset (08 then says why)
    shared = tmp_path / "shared" / "data" / "tinystories"
    shared.mkdir(parents=True)
    assert _sourced_path(repo, env) == str(shared)
    (repo / "data" / "tinystories").mkdir(parents=True)  # a local copy comes first
    assert _sourced_path(repo, env) == str(repo / "data" / "tinystories")
    assert _sourced_path(repo, {**env, ENV_VAR: "/my/stories"}) == "/my/stories"  # set: kept
