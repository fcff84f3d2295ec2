"""The HTTP face: app, routes, auth, request bodies and caps, response and error rendering, uvicorn."""
