-- Tool lists per credential (issue "Upstream MCP servers behind Gatehouse" §4): an API key or a
-- personal URL may be limited to some tools (`--tools`) or kept from some (`--deny-tools`).
-- NULL: every tool; else JSON {"only": [names]} or {"except": [names]} (catalog names).
ALTER TABLE api_keys ADD COLUMN tool_filter TEXT;
ALTER TABLE personal_urls ADD COLUMN tool_filter TEXT;
