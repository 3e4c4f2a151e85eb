--- The pool's tables, as a deployment would create them in a migration, with
-- three free runners. Shared by the specs and the scenarios.
return {
  schema = [[
    CREATE TABLE slots (id TEXT PRIMARY KEY, project TEXT, token TEXT, expires_at INTEGER);
    CREATE TABLE grants (token TEXT NOT NULL, project TEXT NOT NULL, slot TEXT NOT NULL,
                         granted_at INTEGER NOT NULL, ended_at INTEGER);
  ]],
  rows = { slots = { { id = "r-1" }, { id = "r-2" }, { id = "r-3" } } },
}
