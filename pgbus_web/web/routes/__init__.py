"""The pages' routes: each parses its request, calls the core and answers."""
