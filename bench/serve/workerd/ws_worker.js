// The workerd side of bench/serve/ws.sh: bench/serve/eutaxy/ws_worker.lua in
// JavaScript; message for message the same work.
//   GET /room/<name>, Upgrade: websocket   joins room <name>: the room object
//                                          accepts the socket (Hibernation API)
// A message is broadcast to every socket of its room, the sender's included,
// except "hibernated?", which the room answers to its sender alone:
// "hibernated" if the object was rebuilt since it accepted a socket (its
// memory lost, so it had hibernated), "awake" if not.
import { DurableObject } from "cloudflare:workers";

export class Room extends DurableObject {
  fetch() {
    const pair = new WebSocketPair();
    this.ctx.acceptWebSocket(pair[1]);
    this.accepted = true;
    return new Response(null, { status: 101, webSocket: pair[0] });
  }

  webSocketMessage(ws, message) {
    if (message === "hibernated?") {
      ws.send(this.accepted ? "awake" : "hibernated");
      return;
    }
    for (const other of this.ctx.getWebSockets()) other.send(message);
  }
}

export default {
  async fetch(request, env) {
    const m = new URL(request.url).pathname.match(/^\/room\/([^/]+)$/);
    if (!m) return new Response("not found\n", { status: 404 });
    if (request.headers.get("Upgrade") !== "websocket") {
      return new Response("expected a WebSocket upgrade\n", { status: 426 });
    }
    return env.ROOM.getByName(m[1]).fetch(request);
  },
};
