--- The shop's orders table, as a deployment would create it in a migration.
-- Shared by the specs and the scenarios.
return {
  schema = [[
    CREATE TABLE orders (id TEXT PRIMARY KEY, idem_key TEXT NOT NULL, item TEXT NOT NULL,
                         quantity INTEGER NOT NULL, placed_at INTEGER NOT NULL);
  ]],
}
