"""The N-d array container, ``carray``: indexing, slicing, rechunking and copies."""
