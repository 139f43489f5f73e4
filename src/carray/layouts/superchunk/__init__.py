"""carray's own layout: superchunk files, index pages and versions."""
