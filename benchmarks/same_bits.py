"""Same bits at two commits: hashes of what a few training steps and the analyses produce, for
whichever rt_lib is imported, so that a refactor meant to change no number can be checked in
seconds before the notebooks are re-run (nbval is the full check).

    PYTHONPATH=/path/to/old/checkout .venv/bin/python benchmarks/same_bits.py > before.txt
    .venv/bin/python benchmarks/same_bits.py > after.txt && diff before.txt after.txt

Source the kernel settings first (scripts/kernel_env.sh), as the notebooks run.  Covers each path a
notebook's training takes: the shared-prefix shortcut (modular addition, two blocks), the
(position, token) tables under residual batch dropout (miiii), the plain forward at the last
position (miiii with GPT-2 dropout, as notebook 11), the full forward with GPT-2 dropout beyond
SHORT_SEQ keys (SDPA), the LSTM; and the analyses that read activations (hidden states,
attention patterns, the neuron grid).  One line per item: its name and the first 16 hex digits
of a sha256 of its bytes.  Asserts nothing.
"""

import hashlib

import torch
import torch.nn.functional as F

from rt_lib.analysis import activations as analysis
from rt_lib.analysis import fourier
from rt_lib.model import LSTMConfig, TransformerConfig, build_model, fast_paths, miiii_config
from rt_lib.tasks.miiii import miiii_task
from rt_lib.tasks.modular import modular_addition
from rt_lib.training.grokfast import Grokfast
from rt_lib.training.train import TrainConfig, make_optimizer, train, train_step

#: the forward train_step runs for a task scored at every position (at commits before
#: fast_paths.logits existed, the model's own forward was that)
TRAINING_FORWARD = getattr(fast_paths, "logits", lambda model, x: model(x))


def digest(*tensors: torch.Tensor) -> str:
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def train_steps(model, task, cfg: TrainConfig, seed: int, steps: int = 10):
    """``steps`` full-batch steps of ``model`` on ``task`` from torch seed ``seed``; the last batch."""
    opt = make_optimizer(model, cfg)
    torch.manual_seed(seed)
    for step in range(steps):
        x, y = task.get_batch(0, None, step)
        train_step(model, task, opt, x, y, cfg, step=step)
    return x


def main() -> None:
    torch.set_num_threads(1)
    cfg = TrainConfig(steps=20, batch_size=None, lr=1e-2, warmup_steps=2, weight_decay=1.0,
                      progress=False)
    task = modular_addition(23, train_fraction=0.5)
    model = build_model(TransformerConfig(d_vocab=23, n_ctx=2, d_model=32, n_layers=2, n_heads=4,
                                          trainable="embeddings"), 0)
    x = train_steps(model, task, cfg, seed=1)
    print("modular addition, 10 steps", digest(*model.parameters()))
    print("modular addition, hidden states", digest(*analysis.hidden_states(model, x).values()))

    task = miiii_task(13, "miiii", split="code", train_fraction=0.5)
    model = build_model(miiii_config(13, d_model=32, n_heads=4, dropout=0.1), 0)
    x = train_steps(model, task, cfg, seed=2)
    print("miiii, 10 steps", digest(*model.parameters()))
    grid = fourier.neuron_grid(model, 13)
    print("miiii, neuron grid", hashlib.sha256(grid.tobytes()).hexdigest()[:16])
    print("miiii, attention patterns", digest(analysis.attention_patterns(model, x[:50])))

    # notebook 11's CPU profile: GPT-2 dropout drops the embeddings, so no table shortcut: the
    # plain forward at the last position (last_only)
    model = build_model(miiii_config(13, d_model=32, n_heads=4, dropout=0.2, dropout_at="gpt2",
                                     dropout_mask="sample"), 0)
    x = train_steps(model, task, cfg, seed=4)
    print("miiii GPT-2 dropout (plain last_only), 10 steps", digest(*model.parameters()))

    # the training loop itself, with grokfast's filter on the gradients (from zero, as the
    # miiii code starts it, and from the first gradient, as Lee et al.'s): batches to the device,
    # the hook, the optimiser and the schedule as a notebook's run takes them
    for init in ("zero", "grad"):
        model = build_model(miiii_config(13, d_model=32, n_heads=4, dropout=0.1), 0)
        loop = TrainConfig(steps=10, batch_size=None, lr=1e-2, warmup_steps=0, weight_decay=1.0,
                           schedule="constant", grad_clip=None, eval_every=10, progress=False,
                           seed=5)
        train(model, task, loop, grad_hook=Grokfast(0.98, 2.0, init))
        print(f"miiii, train() with grokfast from {init}, 10 steps", digest(*model.parameters()))

    model = build_model(TransformerConfig(d_vocab=11, n_ctx=16, d_model=32, n_layers=2, n_heads=4,
                                          dropout=0.1, dropout_at="gpt2"), 0)
    opt = make_optimizer(model, cfg)
    torch.manual_seed(3)
    x = torch.randint(0, 11, (64, 16), generator=torch.Generator().manual_seed(0))
    for _ in range(10):
        loss = F.cross_entropy(TRAINING_FORWARD(model, x).flatten(0, 1), x.roll(1, 1).flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("GPT-2 dropout, 16 positions, 10 steps", digest(*model.parameters()))
    print("GPT-2 dropout, attention patterns", digest(analysis.attention_patterns(model, x[:8])))
    lstm = build_model(LSTMConfig(d_vocab=11, d_model=16), 0)
    print("LSTM, last-position logits", digest(lstm(x, last_only=True)))


if __name__ == "__main__":
    main()
