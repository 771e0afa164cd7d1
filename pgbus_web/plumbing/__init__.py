"""The HTTP plumbing the pages and the JSON API share: the extension's
state on the app, CSRF, security headers and who may act, HTMX's headers,
run ids in URLs, the answers for unrouted paths under the prefix."""
