"""The model: what a transformer (or the LSTM baseline) computes, in one plain forward with hook
points (``transformer``), and the same logits by regrouped arithmetic for training
(``fast_paths``: attention kernels, the multi-task unembedding, last-position shortcuts; beside
it, proven equal by test).

``rt_lib.model`` names the transformer module's public names, so ``from rt_lib.model import
build_model`` reads as before and checkpoints pickled with ``rt_lib.model`` class paths still
load."""

from rt_lib.model.transformer import (
    LSTM,
    MLP,
    TRAINABLE_PARAMS,
    TRUNCATED_STD,
    Attention,
    BatchDropout,
    Block,
    Hooked,
    HookFn,
    HookPoint,
    LastPosition,
    LayerNorm,
    LSTMConfig,
    LSTMInit,
    LSTMTrainable,
    ModelConfig,
    Trainable,
    Transformer,
    TransformerConfig,
    apply_trainable,
    attend,
    attention_pattern,
    build_model,
    count_params,
    eval_mode,
    init_parameter,
    miiii_config,
    sinusoidal_positions,
)

__all__ = [
    "Trainable", "LSTMTrainable", "LSTMInit", "LastPosition", "TRAINABLE_PARAMS",
    "TRUNCATED_STD", "TransformerConfig", "LSTMConfig", "ModelConfig", "miiii_config",
    "sinusoidal_positions", "attention_pattern", "attend", "HookPoint", "HookFn", "Hooked",
    "LayerNorm", "Attention", "MLP", "BatchDropout", "init_parameter", "Block", "Transformer",
    "LSTM", "apply_trainable", "build_model", "count_params", "eval_mode",
]
