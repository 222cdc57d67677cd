-- A key's page reads its own history: by key, newest first.
CREATE INDEX audit_events_key ON audit_events (key_id, created_at, id);
