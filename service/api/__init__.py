"""The API's wire contract, shared by every face of the service (HTTP, the MCP facade, the CLI).

``schemas``: the request and answer models (and their OpenAPI examples); ``exec``: the one recipe
from a validated exec request to the ``CellSpec`` the registry runs.  Nothing here knows HTTP.
"""
