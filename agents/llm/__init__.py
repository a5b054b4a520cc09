"""LLM agents on the suite (the ``llm`` extra: ``pip install 'rla-gym[llm]'``).

The torch-free text episode is :mod:`rla_gym.llm`; this package binds it to TRL's GRPO and
supplies an LLM judge. Modules here import transformers / TRL where used.
"""
