-- Operators and per-app tool lists (issue "Upstream MCP servers behind Gatehouse" §4 and §7).
-- `accounts.admin`: 1 for an operator (`gatehouse account admin EMAIL`), who may use the console's
-- upstream page. No credential lookup reads it, so it needs no announcement.
ALTER TABLE accounts ADD COLUMN admin INTEGER NOT NULL DEFAULT 0;
-- `consents.tool_filter`: the tools a connected app's grant may use, set on the app's console
-- page; NULL: every tool; else JSON {"only": [names]} or {"except": [names]} (catalog names),
-- like `api_keys.tool_filter` (0026). The access-token lookup reads it through its join of
-- `consents`, whose every update is announced (trigger auth_gen_consents_update, 0012).
ALTER TABLE consents ADD COLUMN tool_filter TEXT;
