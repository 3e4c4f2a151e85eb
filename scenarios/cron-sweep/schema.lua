--- The inventory's tables. The inventory makes them when it is built (so
-- the worker runs under `eutaxy serve` as it is), and the scenarios have
-- them made before the first run (so an invariant finds them even in a
-- run whose every call to the inventory was lost).
return {
  inventory = [[
    CREATE TABLE IF NOT EXISTS holds (seat TEXT PRIMARY KEY, expires_at INTEGER NOT NULL, confirmed INTEGER NOT NULL DEFAULT 0);
    CREATE TABLE IF NOT EXISTS orders (seat TEXT PRIMARY KEY, ordered_at INTEGER NOT NULL);
  ]],
}
