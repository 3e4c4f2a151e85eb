--- The fixed shop with no batching delay (batchDelayMs = 0, fanout's
-- default): each order's deliveries start as soon as it is placed, so the
-- two orders' deliveries to the mailer and the ledger interleave at every
-- call. The benchmark bench/check/outbox checks it.
local fixed = require "worker_fixed"

local Orders = fixed.Orders:extend("Orders")
Orders.batchDelayMs = 0

return { Orders = Orders, Mailer = fixed.Mailer, Ledger = fixed.Ledger, fetch = fixed.fetch }
