"""Tokenizer and sampling for language modelling on TinyStories (Zhong & Andreas §6, Figures 4-5).

* :class:`BPETokenizer`: a byte-level BPE trained with the ``tokenizers`` library on the training
  stories (the authors trained their own tokenizer on TinyStories too), cached under
  ``results/tokenizers/`` keyed by the vocabulary size and a hash of the text it was trained on.
  Byte-level means every string round-trips exactly: no unknown tokens, no normalisation.
* :func:`generate`: seeded sampling of a completion (Figure 5).

The task itself (windows of the token stream, next-token targets) is
:class:`rt_lib.tasks.language.LanguageModelling`.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor, nn

from rt_lib.model import eval_mode
from rt_lib.runtime.io import atomic_write_text, results_dir, shown
from rt_lib.tasks.stories import SEPARATOR

MIN_VOCAB = 257  # the 256 byte symbols of a byte-level BPE plus the end-of-text token


class BPETokenizer:
    """Byte-level BPE: ``encode(text) -> ids``, ``decode(ids) -> text``, exact round trip."""

    def __init__(self, tokenizer) -> None:  # a tokenizers.Tokenizer
        self._tok = tokenizer
        eot = tokenizer.token_to_id(SEPARATOR)
        if eot is None:
            raise ValueError(f"the tokenizer has no {SEPARATOR!r} token")
        self.eot_id: int = eot

    @classmethod
    def train(cls, texts: Sequence[str], vocab_size: int) -> BPETokenizer:
        """Learn merges on ``texts`` until ``vocab_size`` tokens (bytes + end-of-text + merges)."""
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

        if not isinstance(vocab_size, int) or vocab_size < MIN_VOCAB:
            raise ValueError(f"vocab_size must be an integer >= {MIN_VOCAB} (256 bytes + "
                             f"end-of-text), got {vocab_size!r}")
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size, special_tokens=[SEPARATOR], show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        tok.train_from_iterator(texts, trainer=trainer)
        return cls(tok)

    @classmethod
    def load(cls, path: str | Path) -> BPETokenizer:
        from tokenizers import Tokenizer

        return cls(Tokenizer.from_file(str(path)))

    def save(self, path: str | Path) -> Path:
        return atomic_write_text(path, self._tok.to_str())

    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text).ids

    def decode(self, ids: Sequence[int]) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=False)

    def encode_stories(self, stories: Sequence[str]) -> Tensor:
        """One stream [n] of every story followed by the end-of-text token (as in the dataset's
        text dumps), so a window may cross a story boundary and learn where stories end."""
        ids: list[int] = []
        for enc in self._tok.encode_batch(list(stories)):
            ids.extend(enc.ids)
            ids.append(self.eot_id)
        return torch.tensor(ids, dtype=torch.long)


def text_fingerprint(texts: Sequence[str]) -> str:
    h = hashlib.sha256()
    for text in texts:
        h.update(text.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()[:16]


def cached_tokenizer(texts: Sequence[str], vocab_size: int,
                     cache_dir: str | Path | None = None) -> BPETokenizer:
    """The tokenizer for ``texts`` at ``vocab_size``: loaded from ``cache_dir`` (default
    ``results/tokenizers``) when trained before on exactly these texts, else trained and saved
    (also when the cached file is damaged: a warning names it)."""
    folder = Path(cache_dir) if cache_dir is not None else results_dir("tokenizers")
    path = folder / f"bpe_v{vocab_size}_{text_fingerprint(texts)}.json"
    if path.exists():
        # A cache that does not load (cut short, edited) is trained again rather than named
        # for a rerun: the texts are at hand, and training takes seconds at the CPU profile's
        # size, minutes at the paper's, little beside the models trained with it.
        try:
            return BPETokenizer.load(path)
        except Exception as err:  # noqa: BLE001 - tokenizers raises a bare Exception on bad JSON
            problem = str(err).splitlines()[0] if str(err) else type(err).__name__
        warnings.warn(f"{shown(path)} is damaged ({problem}): training the tokenizer again",
                      stacklevel=2)
    tok = BPETokenizer.train(texts, vocab_size)
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(path)
    return tok


@torch.no_grad()
def generate(model: nn.Module, prompt: Sequence[int], max_new_tokens: int, seed: int,
             temperature: float = 1.0, top_k: int | None = None,
             stop_id: int | None = None) -> list[int]:
    """Sample a continuation of ``prompt`` (ids) token by token; the context is cropped to the
    model's last ``n_ctx`` tokens.  ``temperature=0`` is greedy decoding."""
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if not prompt:
        raise ValueError("the prompt is empty")
    device = next(model.parameters()).device
    gen = torch.Generator(device="cpu").manual_seed(seed)
    ids = list(prompt)
    new: list[int] = []
    with eval_mode(model):
        for _ in range(max_new_tokens):
            context = torch.tensor([ids[-model.cfg.n_ctx:]], device=device)
            logits = model(context, last_only=True)[0].float().cpu()  # [v]
            if temperature == 0:
                nxt = int(logits.argmax())
            else:
                logits = logits / temperature
                if top_k is not None:
                    kth = logits.topk(min(top_k, len(logits))).values[-1]
                    logits = logits.masked_fill(logits < kth, float("-inf"))
                nxt = int(torch.multinomial(logits.softmax(-1), 1, generator=gen))
            if nxt == stop_id:
                break
            ids.append(nxt)
            new.append(nxt)
    return new
