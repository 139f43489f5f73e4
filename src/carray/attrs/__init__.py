"""User attributes: the ``attrs`` mapping and the encodings of attribute values."""
