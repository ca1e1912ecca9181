"""A round's other dispatcher: the round's requests sent through a provider's Batch API."""
