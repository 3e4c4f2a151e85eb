--- The chat room, repaired: who is in the room is the host's to remember.
-- Each socket carries its member's name as its attachment, and a line goes
-- to every socket ctx:getWebSockets() gives, so a room that hibernated and
-- woke up still reaches everyone.
local worker = require "worker"

local Room = worker.Room

function Room:join(ws, name) ws:serializeAttachment({ name = name }) end
function Room:name_of(ws) return ws:deserializeAttachment().name end
function Room:sockets() return self.ctx:getWebSockets() end
function Room:webSocketClose() end

return worker
