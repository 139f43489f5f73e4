"""python-blosc2 frames (``.b2nd``): the file format and the layout on it."""
