"""Chunk and block geometry: grids, keys, shapes and chunk I/O."""
