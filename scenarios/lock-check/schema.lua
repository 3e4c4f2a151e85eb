--- The lock's and the audit log's tables, as a deployment would create them
-- in a migration. Shared by the scenarios.
return {
  lock = [[
    CREATE TABLE holders (token TEXT PRIMARY KEY, taken_at INTEGER NOT NULL);
  ]],
  audit = [[
    CREATE TABLE runs (token TEXT PRIMARY KEY, started_at INTEGER NOT NULL);
  ]],
}
