"""LLM agents on the suite (the ``llm`` extra: ``pip install 'rla-gym[llm]'``).

The torch-free text episode is :mod:`rla_gym.llm`; this package binds it to TRL's GRPO and
supplies an LLM judge. Modules here import transformers / TRL where used:

- :mod:`agents.llm.trl_env`: an rla-gym task as TRL's ``environment_factory`` (one ``act``
  tool, the outcome as reward) and task rows drawn from any curriculum;
- :mod:`agents.llm.grpo_trainer`: a ``GRPOTrainer`` with the paper's per-step-index advantages;
- :mod:`agents.llm.advantages`: those advantages in numpy (turn rewards, z-scores, tokens);
- :mod:`agents.llm.tiny`: a tiny random Qwen2 and a tokenizer trained offline, for tests.
"""
