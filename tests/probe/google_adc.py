"""Google Application Default Credentials for Vertex AI tests, with no network: a service-account key file (a fresh
RSA key) whose ``token_uri`` is a token endpoint on 127.0.0.1 that answers every JWT grant with ``TOKEN``. google-auth
reads the file through ``GOOGLE_APPLICATION_CREDENTIALS`` and refreshes against that endpoint, as it would against
Google's."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

TOKEN = "ya29.probe-test-token"
PROJECT = "probe-test-project"


class _Token(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = json.dumps({"access_token": TOKEN, "expires_in": 3600, "token_type": "Bearer"}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.server.grants += 1  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:
        pass


class TokenServer:
    def __init__(self) -> None:
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _Token)
        self._http.grants = 0  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> TokenServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/token"

    @property
    def grants(self) -> int:
        return int(self._http.grants)  # type: ignore[attr-defined]


def service_account_file(directory: Path, token_url: str) -> Path:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()  # fmt: skip
    info = {"type": "service_account", "project_id": PROJECT, "private_key_id": "probe-test", "private_key": pem,
            "client_email": "probe@probe-test.invalid", "client_id": "1", "token_uri": token_url}  # fmt: skip
    path = directory / "adc.json"
    path.write_text(json.dumps(info))
    return path
