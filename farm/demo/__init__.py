"""The bundled demo: an offline expense agent behind a local HTTP server, and a suite for it."""
