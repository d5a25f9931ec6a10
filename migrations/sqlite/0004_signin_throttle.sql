-- Sign-in throttling counts recent failures per source address from the audit log.
CREATE INDEX audit_events_source ON audit_events (source_ip, event, at);
