"""Column kinds: plain, strings, categories, nullable, nested, zoned."""
