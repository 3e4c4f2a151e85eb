# The workerd side of bench/serve: worker.js with SQLite-backed Durable
# Objects stored on local disk. run.sh overrides the socket's address
# (-s http=127.0.0.1:PORT) and the storage directory (-d do-storage=DIR).
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "main", worker = .benchWorker),
    (name = "do-storage", disk = (path = "/nonexistent/set-by-run.sh", writable = true)),
  ],
  sockets = [ (name = "http", address = "127.0.0.1:8080", http = (), service = "main") ],
);

const benchWorker :Workerd.Worker = (
  modules = [ (name = "worker.js", esModule = embed "worker.js") ],
  compatibilityDate = "2026-04-20",
  durableObjectNamespaces = [
    (className = "Counter", uniqueKey = "eutaxy-bench-serve-counter", enableSql = true),
    (className = "LeasePool", uniqueKey = "eutaxy-bench-serve-leasepool", enableSql = true),
  ],
  durableObjectStorage = (localDisk = "do-storage"),
  bindings = [
    (name = "COUNTER", durableObjectNamespace = "Counter"),
    (name = "POOL", durableObjectNamespace = "LeasePool"),
  ],
);
