"""The TinyStories loader: splitting, held-out stories, where data comes from, missing data."""

import pytest

from rt_lib.data import ENV_VAR, SEPARATOR, load_tinystories, read_stories, split_stories


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
