"""The domain core: what every door (the pages, the JSON API, the command
line, the MCP server) calls, and nothing above it. Settings, the reads (a
run, the index, counts, needs attention, insights, locks), the acts (verbs,
signals, operations), the input checks, the refusal table and the shapes
and words every door shows. No Flask request is read here."""
