"""The LightningStore over HTTP: a FastAPI/uvicorn server wrapping any store, and an aiohttp client.

Import `LightningStoreServer` and `LightningStoreClient` from `agentlightning.store` (or `.client_server`); the
submodules need the `server` extra (fastapi, uvicorn, aiohttp). See docs/http.md.
"""
