"""Codecs: bytes in, bytes out.  They know nothing of arrays or files."""
