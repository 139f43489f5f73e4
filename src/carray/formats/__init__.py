"""Single-file formats that sit beside the layouts: each module reads and writes one format."""
