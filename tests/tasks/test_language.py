"""Tokenizer, language-modelling task and sampling (notebook 08)."""

import pickle

import pytest
import torch

from rt_lib.model import TransformerConfig, build_model
from rt_lib.tasks import LanguageModelling
from rt_lib.tasks.tokenizer import BPETokenizer, cached_tokenizer, generate

STORIES = [
    "Once upon a time, there was a little cat named Tom. Tom liked to play with a red ball.",
    "Lily went to the park with her mom. She saw a big dog and said, \"Hello, dog!\"",
    "The sun was hot. Ben drank cold water and felt happy again.",
] * 5


def test_byte_level_round_trip_of_any_text():
    tok = BPETokenizer.train(STORIES, vocab_size=300)
    for text in ["Tom liked the ball.", "  two  spaces\nand a newline\n", "naïve café ✓ 🚀", ""]:
        assert tok.decode(tok.encode(text)) == text
    assert tok.vocab_size == 300


def test_merges_compress_the_training_text():
    bytes_only = BPETokenizer.train(STORIES, vocab_size=257)  # no merges: one token per byte
    merged = BPETokenizer.train(STORIES, vocab_size=400)
    text = STORIES[0]
    assert len(bytes_only.encode(text)) == len(text.encode("utf-8"))
    assert len(merged.encode(text)) < len(text) / 2


def test_stories_are_joined_by_the_end_of_text_token():
    tok = BPETokenizer.train(STORIES, vocab_size=300)
    stream = tok.encode_stories(["Tom ran.", "Sue sat."])
    eot = (stream == tok.eot_id).nonzero().flatten().tolist()
    assert len(eot) == 2 and eot[1] == len(stream) - 1
    assert tok.decode(stream[: eot[0]].tolist()) == "Tom ran."
    assert tok.decode(stream[eot[0] + 1 : eot[1]].tolist()) == "Sue sat."


def test_tokenizer_cache_is_keyed_by_text_and_size(tmp_path):
    a = cached_tokenizer(STORIES, 300, tmp_path)
    assert len(list(tmp_path.glob("*.json"))) == 1
    b = cached_tokenizer(STORIES, 300, tmp_path)  # loaded, same merges
    assert b.encode(STORIES[1]) == a.encode(STORIES[1])
    cached_tokenizer(STORIES[:2], 300, tmp_path)
    cached_tokenizer(STORIES, 280, tmp_path)
    assert len(list(tmp_path.glob("*.json"))) == 3


def test_bad_vocabulary_size():
    with pytest.raises(ValueError, match="vocab_size"):
        BPETokenizer.train(STORIES, vocab_size=100)


def test_language_windows_are_next_token_pairs():
    train_ids, valid_ids = torch.arange(100) % 50, torch.arange(35) % 50
    task = LanguageModelling(train_ids, valid_ids, d_vocab=50, n_ctx=8)
    x, y = task.get_batch(3, 16, seed=1)
    assert x.shape == y.shape == (16, 8)
    assert torch.equal(y[:, :-1], x[:, 1:])  # targets are the inputs shifted by one
    assert torch.equal(y[:, -1], (x[:, -1] + 1) % 50)  # the stream counts up
    assert torch.equal(task.get_batch(3, 16, seed=1)[0], x)  # a pure function of (seed, step)
    vx, vy = task.eval_sets()["valid"]
    assert vx.shape == (4, 8)  # (35 - 1) // 8 non-overlapping windows
    assert torch.equal(vx[:, 0], torch.tensor([0, 8, 16, 24]))
    assert task.n_valid_tokens == 32


def test_a_jobs_copy_carries_a_path_and_trains_on_the_same_windows(tmp_path):
    """--executor local|slurm: the token streams go to a file once; each job's pickle holds its
    path (the paper profile's stream would not fit submitit's pickle), and the unpickled task
    draws exactly the original's batches and evaluation windows."""
    train_ids, valid_ids = torch.randint(0, 50, (200_000,)), torch.randint(0, 50, (3_000,))
    task = LanguageModelling(train_ids, valid_ids, d_vocab=50, n_ctx=16, n_valid_windows=20)
    job = task.for_jobs(tmp_path / "data")
    blob = pickle.dumps(job)
    assert len(blob) < 20_000 < len(pickle.dumps(task))  # the stream alone is 1.6 MB
    again = pickle.loads(blob)
    for step in (0, 7):
        for a, b in zip(task.get_batch(step, 8, seed=3), again.get_batch(step, 8, seed=3)):
            assert a.dtype == b.dtype == torch.long and torch.equal(a, b)
    for a, b in zip(task.eval_sets()["valid"], again.eval_sets()["valid"]):
        assert a.shape == (20, 16) and torch.equal(a, b)
    # the same streams: the same file, written once; other text: a file of its own
    assert task.for_jobs(tmp_path / "data")._streams_file == job._streams_file
    other = LanguageModelling(train_ids.flip(0), valid_ids, d_vocab=50, n_ctx=16)
    assert other.for_jobs(tmp_path / "data")._streams_file != job._streams_file
    assert len(list((tmp_path / "data").glob("*.pt"))) == 2


def test_language_task_rejects_a_too_short_stream():
    with pytest.raises(ValueError, match="validation stream has 5 tokens"):
        LanguageModelling(torch.arange(100), torch.arange(5), d_vocab=100, n_ctx=8)


def test_sampling_is_seeded_and_greedy_is_the_argmax():
    model = build_model(TransformerConfig(d_vocab=20, n_ctx=8, d_model=16, n_layers=1, n_heads=2), 0)
    a = generate(model, [1, 2, 3], 12, seed=5)
    assert a == generate(model, [1, 2, 3], 12, seed=5) and len(a) == 12
    greedy = generate(model, [1, 2, 3], 3, seed=0, temperature=0)
    with torch.no_grad():
        first = int(model(torch.tensor([[1, 2, 3]]), last_only=True).argmax())
    assert greedy[0] == first
    stop = generate(model, [1, 2, 3], 5, seed=0, temperature=0, stop_id=first)
    assert stop == []  # the stop token ends the completion and is not part of it


def test_tinystories_parameters_are_checked():
    from rt_lib.experiments.tinystories import TinyStoriesParams

    with pytest.raises(ValueError, match="vocab_size"):
        TinyStoriesParams(vocab_size=100)
    with pytest.raises(ValueError, match="sample_width"):
        TinyStoriesParams(sample_width=48)
    with pytest.raises(ValueError, match="batch_size"):
        TinyStoriesParams(batch_size=None)
    with pytest.raises(ValueError, match="not divisible by n_heads"):
        TinyStoriesParams(widths=[36])
    with pytest.raises(ValueError, match="prompts"):
        TinyStoriesParams(prompts=["Once", "  "])


def test_epochs_set_the_step_count(tmp_path):
    from rt_lib.experiments.tinystories import TinyStoriesParams

    task = LanguageModelling(torch.arange(100) % 7, torch.arange(20) % 7, d_vocab=7, n_ctx=8)
    # a data folder that exists, so the parameters validate without $RT_TINYSTORIES (never read)
    params = TinyStoriesParams(epochs=2, batch_size=4, n_ctx=8, data_path=str(tmp_path))
    assert params.steps_for(task) == 7  # ceil(2 * 100 / (4 * 8))
    assert TinyStoriesParams(steps=13, data_path=str(tmp_path)).steps_for(task) == 13


def test_every_model_completes_with_the_same_seed():
    from rt_lib.experiments.tinystories import completions

    tok = BPETokenizer.train(STORIES, vocab_size=300)
    model = build_model(TransformerConfig(d_vocab=300, n_ctx=16, d_model=16, n_layers=1, n_heads=2), 0)
    table = completions({"a": model, "b": model}, tok, ("Tom", "Lily went"), 6, seed=0,
                        temperature=1.0, top_k=None)
    assert list(table.columns) == ["prompt", "a", "b"] and (table["a"] == table["b"]).all()


def test_random_widths_train_the_random_transformer_alone_and_save_it(tmp_path, results_tmp):
    from rt_lib.experiments.tinystories import NAME, TinyStoriesParams, loss_table, run

    (tmp_path / "stories.txt").write_text("<|endoftext|>".join(STORIES * 4))
    params = TinyStoriesParams(data_path=str(tmp_path / "stories.txt"), widths=[8], random_widths=[8, 16],
                               n_heads=2, n_layers=1, vocab_size=300, n_ctx=8, steps=2, eval_every=2,
                               warmup_steps=1, batch_size=2, n_valid_windows=2, threads=1)
    result = run(params)
    runs = sorted(zip(result.metrics["model"], result.metrics["width"]))
    assert runs == [("random transformer", 8), ("random transformer", 16), ("trained transformer", 8)]
    assert set(result.models) == {(kind, width, 0) for kind, width in runs}
    saved = sorted(p.name for p in (results_tmp / NAME / "models").glob("*.pt"))
    assert saved == ["random_transformer_d16_r0.pt", "random_transformer_d8_r0.pt",
                     "trained_transformer_d8_r0.pt"]
    table = loss_table(result.metrics)
    assert table["trained transformer"].isna().tolist() == [False, True]  # no trained model at 16
    with pytest.raises(ValueError, match="random_widths"):
        TinyStoriesParams(data_path=str(tmp_path), models=["trained transformer"], random_widths=[64])
