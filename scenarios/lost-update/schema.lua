--- An account's tables, as a deployment would create them in a migration:
-- the balance (one row) and every deposit made. Shared by the specs and the
-- scenarios.
return {
  schema = [[
    CREATE TABLE account (id INTEGER PRIMARY KEY CHECK (id = 1), balance INTEGER NOT NULL);
    CREATE TABLE deposits (id TEXT PRIMARY KEY, amount INTEGER NOT NULL, made_at INTEGER NOT NULL);
  ]],
  rows = { account = { { id = 1, balance = 0 } } },
}
