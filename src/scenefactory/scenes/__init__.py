"""scenes."""
