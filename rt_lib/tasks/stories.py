"""TinyStories text (Eldan & Li 2023; Zhong & Andreas §6; docs/papers.md, random transformers: tasks).

Stories come from local text files, a path given as a parameter or in ``$RT_TINYSTORIES`` (a
file, or a folder whose ``*.txt`` files are read in name order), with stories separated by
``<|endoftext|>`` as in the dataset's own text dumps.  Only when asked (``from_hub=True``) and
when the Hugging Face ``datasets`` package can reach the hub is ``roneneldan/TinyStories``
downloaded instead (cached by ``datasets`` under ``results/hf_cache``).  Otherwise loading
fails with a message that says how to get the data.  Nothing here knows where the project
keeps its copy.
"""

from __future__ import annotations

import os
import random
import re
from dataclasses import dataclass
from pathlib import Path

from rt_lib.runtime.io import results_dir

ENV_VAR = "RT_TINYSTORIES"
SEPARATOR = "<|endoftext|>"
HUB_NAME = "roneneldan/TinyStories"

HOW_TO_GET_DATA = (
    "No TinyStories text found. Either point to local text files with stories separated by "
    f"'{SEPARATOR}' (a file or a folder of *.txt), as the `path` parameter or in the environment "
    f"variable {ENV_VAR}, e.g. `export {ENV_VAR}=/path/to/tinystories`; or pass "
    f"from_hub=True with the `datasets` package installed (`pip install datasets`) and network "
    f"access to the Hugging Face hub ({HUB_NAME})."
)


@dataclass(frozen=True)
class Stories:
    train: list[str]
    valid: list[str]
    source: str  # where they came from: a path or the hub name


def split_stories(text: str) -> list[str]:
    """Stories of one text dump, whitespace trimmed, empty ones dropped: split on the separator,
    or, in a dump without any (one story per line, paragraphs inside a story separated by a
    blank line), on every newline that is not part of a blank line."""
    pieces = text.split(SEPARATOR) if SEPARATOR in text else re.split(r"(?<!\n)\n(?!\n)", text)
    return [s.strip() for s in pieces if s.strip()]


def read_stories(path: str | Path) -> list[str]:
    """All distinct stories under ``path`` (a file, or a folder's ``*.txt`` files in name order)."""
    path = Path(path).expanduser()
    if path.is_dir():
        files = sorted(path.glob("*.txt"))
        if not files:
            raise FileNotFoundError(f"{path} holds no *.txt files. {HOW_TO_GET_DATA}")
    elif path.is_file():
        files = [path]
    else:
        raise FileNotFoundError(f"{path} does not exist. {HOW_TO_GET_DATA}")
    stories: list[str] = []
    seen: set[str] = set()
    for file in files:
        for story in split_stories(file.read_text(encoding="utf-8")):
            key = " ".join(story.split())  # dumps overlap: keep a story once, or it could be
            if key not in seen:  # both trained on and held out
                seen.add(key)
                stories.append(story)
    return stories


def _stories_from_hub(cache_dir: str | Path | None) -> tuple[list[str], list[str]]:
    """(train, validation) stories of ``roneneldan/TinyStories``, the dataset's own splits,
    downloaded once into ``cache_dir`` (default ``results/hf_cache``) by ``datasets``."""
    try:
        import datasets  # optional: only the hub path needs it
    except ImportError as err:
        raise FileNotFoundError(f"from_hub=True needs the `datasets` package. {HOW_TO_GET_DATA}") from err
    cache = str(cache_dir if cache_dir is not None else results_dir("hf_cache"))
    try:
        data = datasets.load_dataset(HUB_NAME, cache_dir=cache)
    except Exception as err:  # no network, hub down, ...: say what to do instead
        raise FileNotFoundError(f"Could not load {HUB_NAME} from the hub ({err}). {HOW_TO_GET_DATA}") from err
    return tuple([s.strip() for s in data[split]["text"] if s.strip()]
                 for split in ("train", "validation"))


def load_tinystories(path: str | Path | None = None, valid_fraction: float = 0.05,
                     split_seed: int = 0, max_stories: int | None = None,
                     from_hub: bool = False, cache_dir: str | Path | None = None) -> Stories:
    """TinyStories, split into training and held-out stories.

    Where from, first match wins: ``path``; the hub when ``from_hub`` (its own train/validation
    split); ``$RT_TINYSTORIES``.  Local stories are shuffled once with ``split_seed`` and
    ``valid_fraction`` of them held out; ``max_stories`` keeps the first stories of the shuffled
    order (small CPU profiles; on the hub it caps the training split)."""
    if not 0.0 < valid_fraction < 1.0:
        raise ValueError(f"valid_fraction must be in (0, 1), got {valid_fraction}")
    if max_stories is not None and max_stories < 2:
        raise ValueError(f"max_stories must be at least 2 (one per split), got {max_stories}")
    if path is None and from_hub:
        train, valid = _stories_from_hub(cache_dir)
        if max_stories is not None:
            train = train[:max_stories]
        return Stories(train=train, valid=valid, source=HUB_NAME)
    path = path or os.environ.get(ENV_VAR) or None
    if path is None:
        raise FileNotFoundError(HOW_TO_GET_DATA)
    stories, source = read_stories(path), str(path)
    random.Random(split_seed).shuffle(stories)
    if max_stories is not None:
        stories = stories[:max_stories]
    if len(stories) < 2:
        raise ValueError(f"{source}: {len(stories)} story found; need at least 2 to hold one out")
    n_valid = min(max(1, round(valid_fraction * len(stories))), len(stories) - 1)
    return Stories(train=stories[n_valid:], valid=stories[:n_valid], source=source)
