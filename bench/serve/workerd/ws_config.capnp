# The workerd side of bench/serve/ws.sh: ws_worker.js with SQLite-backed
# Durable Objects stored on local disk. ws.sh overrides the socket's address
# (-s http=127.0.0.1:PORT) and the storage directory (-d do-storage=DIR).
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "main", worker = .wsWorker),
    (name = "do-storage", disk = (path = "/nonexistent/set-by-ws.sh", writable = true)),
  ],
  sockets = [ (name = "http", address = "127.0.0.1:8080", http = (), service = "main") ],
);

const wsWorker :Workerd.Worker = (
  modules = [ (name = "ws_worker.js", esModule = embed "ws_worker.js") ],
  compatibilityDate = "2026-04-20",
  durableObjectNamespaces = [
    (className = "Room", uniqueKey = "eutaxy-bench-serve-room", enableSql = true),
  ],
  durableObjectStorage = (localDisk = "do-storage"),
  bindings = [ (name = "ROOM", durableObjectNamespace = "Room") ],
);
