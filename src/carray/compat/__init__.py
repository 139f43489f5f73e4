"""Compatibility with other libraries' APIs (bcolz's module functions)."""
