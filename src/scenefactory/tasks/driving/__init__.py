"""tasks driving."""
