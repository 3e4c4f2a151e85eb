--- The coupons' redemptions table, as a deployment would create it in a
-- migration. Shared by the scenarios.
return {
  schema = [[
    CREATE TABLE redemptions (order_id TEXT PRIMARY KEY, code TEXT NOT NULL, redeemed_at INTEGER NOT NULL);
  ]],
}
