"""The playground: a page in the browser that runs cells against this server (``GET /playground``)."""
