"""What every layer shares: parameters, defaults, dtypes, checked JSON, problems."""
