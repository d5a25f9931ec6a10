#!/usr/bin/env python3
"""Generates tests/corpus/malformed.json: malformed requests for every client-facing route.

Each entry: method, path (may hold {TOKEN}: a valid access token filled in by the test),
headers, body (text) or body_b64 (bytes), and shape: the protocol whose error shape the answer
must have ("oauth": RFC 6749 §5.2 JSON; "jsonrpc": a JSON-RPC 2.0 error, with a 4xx or, for an
in-band error of a request, 200 — or the RFC 6750 §3 Bearer challenge (401/403 JSON error with
WWW-Authenticate); "html": an HTML page;
"any": any non-5xx answer, e.g. the console's redirect to sign in). Run it again after adding
cases: python3 tests/corpus/generate.py
"""
import base64, itertools, json, os

FORM = "application/x-www-form-urlencoded"
cases = []

def add(method, path, shape, body=None, headers=None, raw=None):
    entry = {"method": method, "path": path, "shape": shape, "headers": headers or {}}
    if raw is not None:
        entry["body_b64"] = base64.b64encode(raw).decode()
    elif body is not None:
        entry["body"] = body
    cases.append(entry)

bad_forms = [
    "", "=", "&&&", "grant_type", "grant_type=", "grant_type=password",
    "grant_type=authorization_code", "grant_type=authorization_code&code=x&code=y",
    "grant_type=refresh_token&refresh_token=%zz", "grant_type=refresh_token&refresh_token=" + "A" * 15000,
    "grant_type=client_credentials&client_id=gc_nope&client_secret=x",
    "grant_type=authorization_code&code=gate_ac_x&code_verifier=short&client_id=gc_x&redirect_uri=javascript:alert(1)",
    "token=gate_at_x&token_type_hint=nonsense", "token=&client_id=", "client_id=%00%01%02",
    "a=" + "%" * 100, "grant_type=refresh_token&refresh_token=gate_rt_x&client_id=https%3A%2F%2Fevil%2F..%2F",
]
basic = ["Basic", "Basic !!!", "Basic " + base64.b64encode(b"nocolon").decode(),
         "Basic " + base64.b64encode(b"\xff\xfe:\xff").decode(), "Basic " + base64.b64encode(b"\x00:x").decode(),
         "Basic " + base64.b64encode(b"gc_%00:x").decode(), "Bearer x", "Basic  " + "A" * 5000]
for path in ["/oauth/token", "/oauth/revoke", "/oauth/introspect"]:
    for body in bad_forms:
        add("POST", path, "oauth", body, {"content-type": FORM})
    for auth in basic:
        add("POST", path, "oauth", "grant_type=refresh_token&refresh_token=x&token=x",
            {"content-type": FORM, "authorization": auth})
    add("POST", path, "oauth", '{"grant_type":"refresh_token"}', {"content-type": "application/json"})
    add("POST", path, "oauth", None, {})
    add("POST", path, "oauth", raw=b"grant_type=\xff\xfe&x=\xc3", headers={"content-type": FORM})

bad_json = [
    "", "null", "1", "[]", "\"x\"", "{", "{\"redirect_uris\":", "[" * 5000 + "]" * 5000,
    "{\"a\":" * 3000 + "1" + "}" * 3000, "{\"redirect_uris\":[]}", "{\"redirect_uris\":\"https://x\"}",
    "{\"redirect_uris\":[1,2]}", "{\"redirect_uris\":[\"javascript:alert(1)\"]}",
    "{\"redirect_uris\":[\"https://a.example/cb#frag\"]}", "{\"redirect_uris\":[\"http://evil.example/cb\"]}",
    "{\"redirect_uris\":[\"https://a.example/cb\"],\"token_endpoint_auth_method\":\"private_key_jwt\"}",
    "{\"redirect_uris\":[\"https://a.example/cb\"],\"grant_types\":[\"password\"]}",
    "{\"redirect_uris\":[\"https://a.example/cb\"],\"client_name\":\"\\u202eevil\"}",
    "{\"redirect_uris\":[\"https://a.example/cb\"],\"client_name\":" + json.dumps("x" * 5000) + "}",
    "{\"redirect_uris\":[\"https://a.example/cb\"],\"scope\":\"mcp:read \\u0000\"}",
    "{\"redirect_uris\":[\"https://a.example/cb\"],\"response_types\":[\"token\"]}",
]
for body in bad_json:
    add("POST", "/oauth/register", "oauth", body, {"content-type": "application/json"})
add("POST", "/oauth/register", "oauth", "redirect_uris=x", {"content-type": FORM})
add("POST", "/oauth/register", "oauth", raw=b"{\"redirect_uris\":[\"\xff\"]}", headers={"content-type": "application/json"})

queries = [
    "", "client_id=", "client_id=gc_nope", "client_id=a&client_id=b", "response_type=token",
    "client_id=gc_nope&redirect_uri=javascript:alert(1)", "client_id=%zz", "client_id=" + "x" * 4000,
    "client_id=https%3A%2F%2F127.0.0.1%2Fmeta", "client_id=https%3A%2F%2Fexample.com%2F",
    "client_id=gc_nope&response_type=code&code_challenge=short&code_challenge_method=plain",
    "client_id=gc_nope&scope=%00", "client_id=%00", "client_id=gc_x&redirect_uri=https%3A%2F%2Fa.example%2F%00", "redirect_uri=https%3A%2F%2Fa.example%2Fcb&redirect_uri=x",
]
for q in queries:
    add("GET", "/oauth/authorize?" + q, "html")

jsonrpc = [
    "", "null", "1", "[]", "\"x\"", "{", "{}", "{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}",
    "{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":5}",
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":[]}",
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{}}",
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":5}}",
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/read\",\"params\":{\"uri\":5}}",
    "[" * 5000 + "]" * 5000, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":" + "{\"a\":" * 3000 + "1" + "}" * 3000 + "}",
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":5}}",
]
mcp_headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
               "authorization": "Bearer {TOKEN}"}
for body in jsonrpc:
    add("POST", "/mcp", "jsonrpc", body, mcp_headers)
add("POST", "/mcp", "jsonrpc", raw=b"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"ping\"}", headers=mcp_headers)
for auth in ["Bearer", "Bearer ", "Bearer a b", "Bearer gate_at_nope", "Basic Zm9vOmJhcg==", "bearer\t" + "x" * 9000, "Bearer {TOKEN}, Bearer {TOKEN}"]:
    add("POST", "/mcp", "jsonrpc", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}",
        {**mcp_headers, "authorization": auth})
for name, value in [("content-type", "text/plain"),
                    ("accept", "text/html"), ("mcp-protocol-version", "1999-01-01")]:
    add("POST", "/mcp", "jsonrpc", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", {**mcp_headers, name: value})
for method in ["GET", "PUT", "DELETE", "PATCH"]:
    add(method, "/mcp", "jsonrpc", None, {"authorization": "Bearer {TOKEN}", "accept": "application/json, text/event-stream"})
add("POST", "/mcp", "any", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", {**mcp_headers, "origin": "https://evil.example"})
add("POST", "/mcp", "any", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", {**mcp_headers, "content-type": "application/json; charset=latin1"})
add("POST", "/mcp/gate_mu_x/extra", "any", "{}", {"content-type": "application/json"})
for secret in ["x", "gate_mu_nope", "gate_mu_" + "A" * 300, "%zz"]:
    add("POST", "/mcp/" + secret, "jsonrpc", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}",
        {"content-type": "application/json", "accept": "application/json, text/event-stream"})

for path in ["/.well-known/oauth-protected-resource/nope", "/.well-known/oauth-authorization-server/nope"]:
    add("GET", path, "any")
for path, body in itertools.product(
        ["/signin", "/setup", "/oauth/authorize/decision", "/signout", "/apps/revoke", "/keys/create",
         "/keys/revoke", "/keys/urls/create", "/keys/urls/revoke", "/account/password",
         "/account/sign-out-everywhere", "/projects/x/members", "/projects/x/members/remove"],
        ["", "csrf=x&email=%zz", "a=" + "b" * 10000]):
    add("POST", path, "any", body, {"content-type": FORM})
for path in ["/projects/%00", "/apps/%zz", "/setup?token=%zz", "/signin?next=javascript:alert(1)", "/keys?x=" + "y" * 5000]:
    add("GET", path, "any")

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "malformed.json")
with open(out, "w") as f:
    json.dump(cases, f, indent=0)
    f.write("\n")
print(f"{len(cases)} cases written to {out}")
