--- The tables of both objects, as a deployment would create them in a
-- migration. Shared by the scenarios and the fixed worker.
return {
  orders = [[
    CREATE TABLE orders (id TEXT PRIMARY KEY, room TEXT NOT NULL);
  ]],
  books = [[
    CREATE TABLE bookings (order_id TEXT PRIMARY KEY, room TEXT NOT NULL);
    CREATE TABLE cancelled (order_id TEXT PRIMARY KEY);
  ]],
}
