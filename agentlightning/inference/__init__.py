"""Local inference for the embedded default model: an engine and an OpenAI/vLLM-compatible server.

Needs the `inference` extra (torch, transformers, ...); nothing heavy is imported until it is used.
"""
