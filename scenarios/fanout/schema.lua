--- The tables of the shop, the mailer and the ledger, as migrations would create them.
return {
  orders = {
    schema = [[
      CREATE TABLE orders (id TEXT PRIMARY KEY, amount INTEGER NOT NULL);
      CREATE TABLE dead_letters (message_id TEXT NOT NULL, target TEXT NOT NULL, reason TEXT NOT NULL);
    ]],
  },
  mail = { schema = "CREATE TABLE sent (order_id TEXT PRIMARY KEY)" },
  books = { schema = "CREATE TABLE entries (order_id TEXT NOT NULL, amount INTEGER NOT NULL)" },
}
