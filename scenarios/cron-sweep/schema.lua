--- The inventory's tables, as a deployment would create them in a
-- migration. Shared by the scenarios.
return {
  inventory = [[
    CREATE TABLE holds (seat TEXT PRIMARY KEY, expires_at INTEGER NOT NULL, confirmed INTEGER NOT NULL DEFAULT 0);
    CREATE TABLE orders (seat TEXT PRIMARY KEY, ordered_at INTEGER NOT NULL);
  ]],
}
