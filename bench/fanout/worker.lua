--- The object of the fanout benchmark (bench/fanout/bench.lua): three
-- targets that take every message, counted in memory.
local eutaxy = require "eutaxy"

local Bench = eutaxy.DurableObject:extend("Bench")

function Bench:init()
  local config = self.ctx.storage:get("config") or {}
  self.count = 0
  local targets = {}
  for _, name in ipairs({ "audit", "billing", "webhook" }) do
    if config.ackOnReturn then
      targets[name] = { ackOnReturn = true, deliver = function(messages)
        self.count = self.count + #messages
      end }
    else
      targets[name] = { deliver = function(messages)
        for _, m in ipairs(messages) do m:ack() end
        self.count = self.count + #messages
      end }
    end
  end
  self.fanout = eutaxy.fanout {
    ctx = self.ctx, targets = targets,
    maxBatchSize = config.maxBatchSize, batchDelayMs = config.batchDelayMs,
  }
end

function Bench:alarm(info) return eutaxy.scheduler(self.ctx):alarm(info) end

function Bench:configure(config) self.ctx.storage:put("config", config) end

local function body(i) return { order = i, amount = i % 97, note = "order placed" } end

--- Enqueues messages from .. from + n - 1 as one batch (one enqueue call).
function Bench:fill(from, n)
  local batch = {}
  for i = 1, n do batch[i] = { id = "m-" .. (from + i - 1), body = body(from + i - 1) } end
  local r = self.fanout:enqueue(batch)
  assert(r.success, r.error and r.error.message)
  return r.load.pending
end

--- n enqueue calls of one message each, in this invocation's turn.
function Bench:enqueueEach(from, n)
  for i = from, from + n - 1 do
    assert(self.fanout:enqueue({ id = "m-" .. i, body = body(i) }).success)
  end
end

--- One message: the whole of an enqueue request, turn and commit included.
function Bench:enqueueOne(i)
  assert(self.fanout:enqueue({ id = "m-" .. i, body = body(i) }).success)
end

function Bench:delivered() return self.count end

function Bench:load() return self.fanout:load() end

return { Bench = Bench }
