"""Tables in bcolz's directory layout: undo journal and refresh."""
