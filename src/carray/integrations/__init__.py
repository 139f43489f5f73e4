"""Bridges from carray to other libraries (xarray, ...); each imports its library lazily."""
