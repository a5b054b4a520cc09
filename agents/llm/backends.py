"""Text generation behind one small protocol, for the LLM judge and LLM policies.

A :class:`Backend` turns prompts into ``n`` sampled replies each. A prompt is a string (sent
as is) or a list of chat messages (``{"role": ..., "content": ...}``), which a backend renders
the way its model expects:

- :class:`TransformersBackend`: a ``transformers`` causal LM on the CPU or a GPU; chat
  messages go through the tokenizer's chat template.
- :class:`OpenAIBackend`: any OpenAI-compatible server (a vLLM server, ``trl vllm-serve``'s
  cousin ``vllm serve``), over HTTP with the standard library only.
- :class:`ScriptedBackend`: replies from a function or a list, for tests and docs.

Temperature 0 means greedy decoding: the ``n`` replies to a prompt are then one reply repeated.

Examples:
    >>> backend = ScriptedBackend(["\\\\boxed{1}", "\\\\boxed{-1}"])
    >>> backend.generate(["Is this step good?"], n=3)
    [['\\\\boxed{1}', '\\\\boxed{-1}', '\\\\boxed{1}']]
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import cycle
from typing import Any, Protocol, runtime_checkable

#: A chat message, ``{"role": "system" | "user" | "assistant", "content": "..."}``.
Message = dict[str, str]
#: A prompt: raw text, or chat messages a backend renders for its model.
Prompt = str | list[Message]


@runtime_checkable
class Backend(Protocol):
    """Generates ``n`` replies per prompt."""

    def generate(
        self, prompts: Sequence[Prompt], n: int = 1, temperature: float = 1.0, max_new_tokens: int = 256
    ) -> list[list[str]]:
        """``n`` replies for each prompt, in the prompts' order."""
        ...


def check_sampling(n: int, temperature: float, max_new_tokens: int) -> None:
    """Reject sampling settings no backend can honour, naming the value."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    if not isinstance(temperature, (int, float)) or not 0 <= temperature < float("inf"):
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be an integer >= 1, got {max_new_tokens!r}")


def as_messages(prompt: Prompt) -> list[Message]:
    """Chat messages for ``prompt`` (a string becomes one user message)."""
    return [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)


class ScriptedBackend:
    """Replies from ``script``: a function of the prompt (called once per reply) or a list of
    replies handed out in turn, cycling. Every prompt it is given is kept in :attr:`prompts`."""

    def __init__(self, script: Callable[[Prompt], str] | Sequence[str]) -> None:
        if callable(script):
            self._reply = script
        else:
            replies = list(script)
            if not replies or not all(isinstance(r, str) for r in replies):
                raise ValueError(f"script must be a function or a non-empty list of strings, got {script!r}")
            turn = cycle(replies)
            self._reply = lambda prompt: next(turn)
        self.prompts: list[Prompt] = []

    def generate(
        self, prompts: Sequence[Prompt], n: int = 1, temperature: float = 1.0, max_new_tokens: int = 256
    ) -> list[list[str]]:
        """``n`` scripted replies per prompt; the temperature is ignored."""
        check_sampling(n, temperature, max_new_tokens)
        self.prompts.extend(prompts)
        return [[str(self._reply(prompt)) for _ in range(n)] for prompt in prompts]


class TransformersBackend:
    """A ``transformers`` causal LM and its tokenizer; prompts are batched ``batch_size`` at a time.

    Chat messages are rendered with ``tokenizer.apply_chat_template(add_generation_prompt=True)``;
    the tokenizer pads on the left. Replies are decoded without special tokens.
    """

    def __init__(self, model: Any, tokenizer: Any, *, batch_size: int = 16) -> None:
        if tokenizer.pad_token_id is None:
            raise ValueError("the tokenizer needs a pad token (set tokenizer.pad_token)")
        self.model, self.tokenizer, self.batch_size = model, tokenizer, batch_size
        tokenizer.padding_side = "left"  # generation continues from the right end of each row

    @classmethod
    def from_pretrained(cls, path: str, *, device: str = "auto", **kwargs: Any) -> TransformersBackend:
        """Load a model directory (local files only: nothing is downloaded)."""
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model: Any = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
        return cls(model.to(device).eval(), tokenizer, **kwargs)

    def render(self, prompt: Prompt) -> str:
        """The text the model continues: ``prompt`` itself, or the chat template applied to it."""
        if isinstance(prompt, str):
            return prompt
        text = self.tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
        return str(text)

    def generate(
        self, prompts: Sequence[Prompt], n: int = 1, temperature: float = 1.0, max_new_tokens: int = 256
    ) -> list[list[str]]:
        """``n`` replies per prompt, sampled at ``temperature`` (greedy at 0)."""
        import torch

        check_sampling(n, temperature, max_new_tokens)
        sample = temperature > 0
        texts = [self.render(p) for p in prompts]
        replies: list[list[str]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = self.tokenizer(texts[start : start + self.batch_size], return_tensors="pt", padding=True)
            batch = batch.to(self.model.device)
            options: dict[str, Any] = {"do_sample": sample, "max_new_tokens": max_new_tokens}
            if sample:  # greedy decoding draws one reply; it is repeated below
                options.update(temperature=float(temperature), num_return_sequences=n)
            with torch.inference_mode():
                out = self.model.generate(**batch, **options, pad_token_id=self.tokenizer.pad_token_id)
            decoded = self.tokenizer.batch_decode(
                out[:, batch["input_ids"].shape[1] :], skip_special_tokens=True
            )
            per_prompt = n if sample else 1
            for i in range(0, len(decoded), per_prompt):
                chunk = decoded[i : i + per_prompt]
                replies.append(chunk if sample else chunk * n)
        return replies


_SPEC_URL = re.compile(r"(https?://[^/\s:]+(?::\d+)?(?:/[^:\s]*)?):(.+)")


class OpenAIBackend:
    """An OpenAI-compatible chat-completions server, e.g. ``vllm serve MODEL`` on a GPU machine.

    ``base_url`` is the API root (``http://host:8000/v1``); each prompt is one
    ``POST {base_url}/chat/completions`` with ``n`` and ``temperature``, sent ``concurrency`` at
    a time. A server that returns fewer than ``n`` choices is asked again for the rest.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout: float = 120.0,
        concurrency: int = 8,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.api_key, self.timeout, self.concurrency = model, api_key, timeout, concurrency

    @classmethod
    def from_spec(cls, spec: str, api_key: str | None = None) -> OpenAIBackend:
        """``URL:MODEL``, e.g. ``http://localhost:8000/v1:Qwen/Qwen2.5-0.5B-Instruct``."""
        match = _SPEC_URL.fullmatch(spec)
        if match is None:
            raise ValueError(f"an OpenAI-compatible server is given as URL:MODEL, got {spec!r}")
        return cls(match[1], match[2], api_key)

    def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url, json.dumps(payload).encode(), headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                body: dict[str, Any] = json.loads(response.read())
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")[:300]
            raise ConnectionError(f"{self.url} answered HTTP {error.code}: {detail}") from error
        except urllib.error.URLError as error:
            raise ConnectionError(f"cannot reach {self.url}: {error.reason}") from error
        return body

    def _complete(self, prompt: Prompt, n: int, temperature: float, max_new_tokens: int) -> list[str]:
        replies: list[str] = []
        while len(replies) < n:
            body = self._post(
                {
                    "model": self.model, "messages": as_messages(prompt), "n": n - len(replies),
                    "temperature": float(temperature), "max_tokens": max_new_tokens,
                }
            )  # fmt: skip
            choices = body.get("choices") or []
            if not choices:
                raise ConnectionError(f"{self.url} returned no choices: {json.dumps(body)[:300]}")
            replies += [(choice.get("message") or {}).get("content") or "" for choice in choices]
        return replies[:n]

    def generate(
        self, prompts: Sequence[Prompt], n: int = 1, temperature: float = 1.0, max_new_tokens: int = 256
    ) -> list[list[str]]:
        """``n`` replies per prompt from the server."""
        check_sampling(n, temperature, max_new_tokens)
        with ThreadPoolExecutor(max_workers=max(1, min(self.concurrency, len(prompts)))) as pool:
            return list(pool.map(lambda p: self._complete(p, n, temperature, max_new_tokens), prompts))
