"""Groups: named arrays and tables with dimensions, versioned together."""
