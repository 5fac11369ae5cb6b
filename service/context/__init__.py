"""The context block an agent puts in its prompt: memory sections fitted to a token budget."""
