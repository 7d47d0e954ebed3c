"""Providers: the LLM backends agents call — OpenAI, Anthropic, and an offline local one."""
