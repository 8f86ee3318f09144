"""A reading list kept in a JSON file, with a command-line interface."""
