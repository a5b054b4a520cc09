"""A tiny random chat model and a tokenizer trained offline on the suite's own text.

For tests and runnable examples without the Hugging Face Hub: :func:`tiny_tokenizer` trains a
byte-level BPE (vocabulary about 600) on :func:`suite_text` and dresses it as a Qwen2.5 chat
tokenizer that TRL can parse tool calls with; :func:`tiny_model` builds a randomly initialised
Qwen2 of about 31k parameters for it. Sampling from it gives noise: for a meaningful rollout,
script the model's ``generate`` (the tests do) or use a real chat model.

Examples:
    >>> tokenizer = tiny_tokenizer()
    >>> ids = tokenizer.apply_chat_template([{"role": "user", "content": "go north"}], tokenize=True)
    >>> model = tiny_model(tokenizer)
    >>> model.num_parameters() < 50_000
    True
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

import rla_gym
from agents.llm.trl_env import INSTRUCTIONS, TaskEnvironment

try:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
    from transformers.utils import get_json_schema
    from trl.chat_template_utils import add_response_schema, qwen2_5_chat_template
except ImportError as error:  # pragma: no cover - the llm extra brings them
    raise ImportError("agents.llm needs the llm extra: pip install 'rla-gym[llm]'") from error

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>")


def tool_call(command: str) -> str:
    """The text of a Qwen-style call of the act tool, as a model writes it."""
    call = json.dumps({"name": "act", "arguments": {"command": command}})
    return f"<tool_call>\n{call}\n</tool_call>"


def suite_text(
    env_ids: Sequence[str] | None = None, difficulties: Sequence[float] = (0.0, 0.5, 1.0), seeds: int = 2
) -> list[str]:
    """The text an agent of the suite reads and writes: oracle episodes through
    :class:`~agents.llm.trl_env.TaskEnvironment` (prompts, tool calls, results), the chat
    template and the act tool's schema."""
    texts = [qwen2_5_chat_template, INSTRUCTIONS, json.dumps(get_json_schema(TaskEnvironment.act))]
    environment = TaskEnvironment()
    for env_id in env_ids or rla_gym.ENV_IDS:
        for difficulty in difficulties:
            for seed in range(seeds):
                texts.append(environment.reset(env_id=env_id, difficulty=difficulty, seed=seed))
                assert environment.episode is not None
                while not environment.episode.done:
                    best = int(np.flatnonzero(environment.episode.info["oracle_mask"])[0])
                    command = environment.episode.commands[best]
                    texts += [tool_call(command), environment.act(command)]
    return texts


def tiny_tokenizer(texts: Iterable[str] | None = None, vocab_size: int = 600) -> PreTrainedTokenizerFast:
    """A byte-level BPE trained on ``texts`` (default :func:`suite_text`) with the Qwen2.5 chat
    template and TRL's response parser, so that tool calls in completions are recognised."""
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator(suite_text() if texts is None else texts, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>", padding_side="left"
    )
    tokenizer.chat_template = qwen2_5_chat_template
    add_response_schema(tokenizer)  # sets the parser on the tokenizer itself
    return tokenizer


def tiny_model(tokenizer: Any, *, hidden_size: int = 32, layers: int = 2, seed: int = 0) -> Qwen2ForCausalLM:
    """A randomly initialised Qwen2 causal LM sized for ``tokenizer`` (seeded, so reproducible)."""
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
        tie_word_embeddings=True,
    )
    return Qwen2ForCausalLM(config)
