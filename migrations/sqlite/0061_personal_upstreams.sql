-- A person's own upstream servers (issue "Connections", item 5; seed 001's per-account
-- registry): rows of `upstreams` that belong to one account. Such a row's `name` is
-- `p_LABEL_XXXXXX` (an underscore, which operator names cannot hold, so the two never meet),
-- its `accounts` names the owner alone, and it shares the operator's pinned definitions
-- (`upstream_tools`), limits, audit and the registry version every instance polls.
ALTER TABLE upstreams ADD COLUMN owner_account TEXT REFERENCES accounts(id) ON DELETE CASCADE;
ALTER TABLE upstreams ADD COLUMN label TEXT;          -- the person's own name for it, [a-z0-9-]{1,16}
ALTER TABLE upstreams ADD COLUMN position INTEGER NOT NULL DEFAULT 0; -- the person's order
CREATE UNIQUE INDEX upstreams_owner_label ON upstreams (owner_account, label);
