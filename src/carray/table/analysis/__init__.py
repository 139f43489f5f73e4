"""Table analysis: group-by, sorting and summaries."""
