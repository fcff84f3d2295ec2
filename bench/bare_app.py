"""The baseline: a bare FastAPI JSON route with the same request shape as ``POST /v1/exec``.

Served by uvicorn exactly like the service (``uvicorn.run`` in a subprocess, same log level), so
the ratio against it isolates what codemode adds on top of FastAPI + uvicorn.
"""

from __future__ import annotations

import argparse

from fastapi import FastAPI
from pydantic import BaseModel

app = FastAPI()


class Body(BaseModel):
    code: str


@app.post("/v1/exec")
async def exec_cell(body: Body) -> dict[str, object]:
    return {"status": "completed", "value": 1, "output": []}


@app.get("/readyz")
async def readyz() -> dict[str, str]:
    return {"status": "ok"}


def main() -> None:
    import uvicorn

    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--log-level", default="warning")
    args = p.parse_args()
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level=args.log_level)


if __name__ == "__main__":
    main()
