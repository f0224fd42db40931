"""What every hosted-model client shares (LLM roles, Whisper API, embeddings): the OpenAI SDK
clients for the configured provider and the typed failure of a model call."""
