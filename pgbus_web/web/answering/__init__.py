"""How the pages answer: templates and their fragments, rendering a block
for HTMX, error pages and messages, 304 for an unchanged poll."""
