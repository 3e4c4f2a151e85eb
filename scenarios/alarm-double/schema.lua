--- A customer's billing tables, as a deployment would create them in a
-- migration: the usage recorded, and the invoice (one row) it is billed to.
-- Shared by the specs and the scenarios.
return {
  schema = [[
    CREATE TABLE usage (period INTEGER NOT NULL, amount INTEGER NOT NULL, recorded_at INTEGER NOT NULL);
    CREATE TABLE invoice (id INTEGER PRIMARY KEY CHECK (id = 1), total INTEGER NOT NULL);
  ]],
  rows = { invoice = { { id = 1, total = 0 } } },
}
