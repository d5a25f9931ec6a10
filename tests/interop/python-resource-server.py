"""A resource server nobody here wrote the auth of: the official Python MCP SDK (PyPI `mcp`)
serving one tool over Streamable HTTP, with Gatehouse as its authorization server. As the SDK's
own examples do, it names Gatehouse in its protected-resource metadata (AuthSettings) and
checks bearer tokens with an RFC 7662 introspection verifier that requires the token's `aud` to
be this server's URL; the SDK's bearer middleware then refuses tokens for any other resource
(validate_token_resource).

Env: RS_PORT, RS_URL (this server's MCP URL, as registered with `gatehouse resource add`),
ISSUER (Gatehouse), RS_CLIENT_ID / RS_CLIENT_SECRET (printed by `resource add --introspect`).
"""

import asyncio
import base64
import json
import os
import urllib.error
import urllib.parse
import urllib.request

from pydantic import AnyHttpUrl

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer

ISSUER = os.environ["ISSUER"]
RS_URL = os.environ["RS_URL"]
PORT = int(os.environ["RS_PORT"])


class IntrospectionVerifier:
    """Asks Gatehouse's introspection endpoint (RFC 7662) about each token."""

    def __init__(self, endpoint: str, client_id: str, client_secret: str, audience: str):
        self.endpoint = endpoint
        basic = base64.b64encode(f"{client_id}:{client_secret}".encode()).decode()
        self.authorization = f"Basic {basic}"
        self.audience = audience

    def _introspect(self, token: str) -> dict | None:
        request = urllib.request.Request(
            self.endpoint,
            data=urllib.parse.urlencode({"token": token}).encode(),
            headers={
                "Authorization": self.authorization,
                "Content-Type": "application/x-www-form-urlencoded",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as r:
                return json.load(r)
        except urllib.error.URLError:
            return None

    async def verify_token(self, token: str) -> AccessToken | None:
        answer = await asyncio.to_thread(self._introspect, token)
        if answer is None:
            return None
        if not answer.get("active"):
            return None
        if answer.get("aud") != self.audience:
            return None
        return AccessToken(
            token=token,
            client_id=answer["client_id"],
            scopes=answer.get("scope", "").split(),
            expires_at=answer.get("exp"),
            resource=answer["aud"],
            subject=answer.get("sub"),
        )


server = MCPServer(
    "Files (Python SDK resource server)",
    token_verifier=IntrospectionVerifier(
        f"{ISSUER}/oauth/introspect",
        os.environ["RS_CLIENT_ID"],
        os.environ["RS_CLIENT_SECRET"],
        RS_URL,
    ),
    auth=AuthSettings(
        issuer_url=AnyHttpUrl(ISSUER),
        resource_server_url=AnyHttpUrl(RS_URL),
        required_scopes=["files:read"],
        validate_token_resource=True,
    ),
)


@server.tool()
def whoami() -> str:
    """The account and client the token was issued to, and its scopes."""
    token = get_access_token()
    assert token is not None
    return f"sub={token.subject} client={token.client_id} scopes={' '.join(token.scopes)}"


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=PORT, streamable_http_path="/mcp")
