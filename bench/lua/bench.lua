-- wrk script of bench/run.sh: one request shape per BENCH_MODE, every response checked.
--
-- Environment:
--   BENCH_MODE    gatehouse-mcp | peer-mcp | session-mcp | introspect | refresh | unauth
--   BENCH_TOKENS  file with one token a line (access tokens; for refresh, one chain per thread)
--   BENCH_TOOL    gatehouse-mcp: the tool called (default list_projects); a name ending in
--                 "__echo" is an upstream's server-everything `echo`, called with
--                 {"message":"Bench project"}, whose result must read "Echo: Bench project"
--   BENCH_SESSION session-mcp: the Mcp-Session-Id of a session opened beforehand (bench/mcp-echo.mjs)
--                 on a server-everything or mcp-proxy; `echo` is called without a token
--   BENCH_AUTH    introspect: the Basic credentials, base64
--   BENCH_CLIENT  refresh: the public client's id
--
-- A response counts as bad when its status is not the expected one (2xx; 401 for unauth) or
-- its body lacks the expected member: "result" with the expected text (and no "isError":true)
-- for MCP, JSON or an SSE event alike, "active":true
-- for introspection, a new refresh_token for rotation (which then becomes the thread's next
-- token: run refresh with -tN -cN, one connection per thread, on fresh chains: the token
-- rotated by the request in flight when wrk stops is never seen). done() prints one line
-- "BENCH_RESULT {json}".

local mode = os.getenv("BENCH_MODE") or "unauth"
local token_file = os.getenv("BENCH_TOKENS")
if token_file == "" then token_file = nil end
local threads = {}
local next_id = 0

function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
  table.insert(threads, thread)
end

local function read_lines(path)
  local out = {}
  for line in io.lines(path) do
    if line ~= "" then out[#out + 1] = line end
  end
  return out
end

local function urlencode(s)
  return (s:gsub("[^%w%-%._~]", function(c) return string.format("%%%02X", string.byte(c)) end))
end

function init(args)
  ok = 0
  bad = 0
  tokens = token_file and read_lines(token_file) or {}
  cursor = 0
  if mode == "gatehouse-mcp" then
    wrk.method = "POST"
    wrk.headers["Authorization"] = "Bearer " .. tokens[1]
    wrk.headers["Content-Type"] = "application/json"
    wrk.headers["Accept"] = "application/json, text/event-stream"
    wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
    local tool = os.getenv("BENCH_TOOL") or ""
    if tool == "" then tool = "list_projects" end
    local arguments = "{}"
    expect = "Bench project"
    if string.sub(tool, -6) == "__echo" then
      arguments = '{"message":"Bench project"}'
      expect = "Echo: Bench project"
    end
    wrk.headers["Mcp-Method"] = "tools/call"
    wrk.headers["Mcp-Name"] = tool
    wrk.body = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"' .. tool .. '","arguments":' .. arguments .. ','
      .. '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'
  elseif mode == "session-mcp" then
    wrk.method = "POST"
    wrk.headers["Content-Type"] = "application/json"
    wrk.headers["Accept"] = "application/json, text/event-stream"
    wrk.headers["MCP-Protocol-Version"] = "2025-11-25"
    wrk.headers["Mcp-Session-Id"] = os.getenv("BENCH_SESSION")
    wrk.body = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"Bench project"}}}'
    expect = "Echo: Bench project"
  elseif mode == "peer-mcp" then
    wrk.method = "POST"
    wrk.headers["Authorization"] = "Bearer " .. tokens[(id % #tokens) + 1]
    wrk.headers["Content-Type"] = "application/json"
    wrk.headers["Accept"] = "application/json, text/event-stream"
    wrk.headers["MCP-Protocol-Version"] = "2025-11-25"
    wrk.headers["Mcp-Method"] = "tools/call"
    wrk.headers["Mcp-Name"] = "echo"
    wrk.body = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"Bench project"}}}'
    expect = "Bench project"
  elseif mode == "introspect" then
    wrk.method = "POST"
    wrk.headers["Authorization"] = "Basic " .. os.getenv("BENCH_AUTH")
    wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
    wrk.headers["Accept"] = "application/json"
  elseif mode == "refresh" then
    wrk.method = "POST"
    wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
    wrk.headers["Accept"] = "application/json"
    client = urlencode(os.getenv("BENCH_CLIENT"))
    current = tokens[id + 1]
  else
    wrk.method = "POST"
    wrk.headers["Content-Type"] = "application/json"
    wrk.headers["Accept"] = "application/json, text/event-stream"
    wrk.body = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_projects","arguments":{}}}'
  end
end

function request()
  if mode == "introspect" then
    cursor = (cursor % #tokens) + 1
    return wrk.format(nil, nil, nil, "token=" .. urlencode(tokens[cursor]) .. "&token_type_hint=access_token")
  elseif mode == "refresh" then
    return wrk.format(nil, nil, nil,
      "grant_type=refresh_token&client_id=" .. client .. "&refresh_token=" .. urlencode(current))
  end
  return wrk.format()
end

function response(status, headers, body)
  local good
  if mode == "unauth" then
    good = status == 401
  elseif status < 200 or status > 299 then
    good = false
  elseif mode == "introspect" then
    good = string.find(body, '"active":true', 1, true) ~= nil
  elseif mode == "refresh" then
    local new = string.match(body, '"refresh_token"%s*:%s*"([^"]+)"')
    good = new ~= nil and new ~= current
    if good then current = new end
  else
    good = string.find(body, '"result"', 1, true) ~= nil
      and string.find(body, expect, 1, true) ~= nil
      and string.find(body, '"isError":true', 1, true) == nil
  end
  if good then ok = ok + 1 else bad = bad + 1 end
end

function done(summary, latency, requests)
  local good, wrong = 0, 0
  for _, t in ipairs(threads) do
    good = good + (t:get("ok") or 0)
    wrong = wrong + (t:get("bad") or 0)
  end
  local e = summary.errors
  io.write(string.format(
    'BENCH_RESULT {"requests":%d,"duration_us":%d,"ok":%d,"bad":%d,"socket_errors":%d,"p50_us":%d,"p99_us":%d}\n',
    summary.requests, summary.duration, good, wrong, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
