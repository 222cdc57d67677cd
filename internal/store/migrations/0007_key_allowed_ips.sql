-- A key's IP allowlist: its entries in canonical form (domain.AllowList),
-- separated by spaces; empty means any address. It is read with the key on
-- the authentication path, so it lives in the key's row, and a change to it
-- bumps key_epoch like a revocation.
ALTER TABLE api_keys ADD COLUMN allowed_ips TEXT NOT NULL DEFAULT '';
