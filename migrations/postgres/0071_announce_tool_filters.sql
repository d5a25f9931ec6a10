-- PostgreSQL already announces a change of a key's or personal URL's tool filter (0026): its
-- triggers compare whole rows less `last_used_at` (0015). This file keeps both folders'
-- names the same (see migrations/sqlite/0071_announce_tool_filters.sql).
SELECT 1;
