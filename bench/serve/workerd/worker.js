// The workerd side of bench/serve: bench/serve/eutaxy/worker.lua in
// JavaScript, with SQLite-backed Durable Objects; request for request the same work.
//   GET  /counter/<name>   one write in object <name>: UPDATE ... RETURNING n
//   GET  /touch/<k>        the same write in object "touch-<k>", fresh on first use
//   POST /lease/acquire    a lease on one of RUNNERS runners of the pool "pool"
import { DurableObject } from "cloudflare:workers";

// As in worker.lua: leases are never released and turn over at 10,000 per second.
const RUNNERS = 1000;
const LEASE_MS = 100;

export class Counter extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    const sql = ctx.storage.sql;
    sql.exec("CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)");
    sql.exec("INSERT OR IGNORE INTO counter (id, n) VALUES (1, 0)");
  }

  hit() {
    return this.ctx.storage.sql.exec("UPDATE counter SET n = n + 1 WHERE id = 1 RETURNING n").one().n;
  }
}

export class LeasePool extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    const sql = ctx.storage.sql;
    sql.exec("CREATE TABLE IF NOT EXISTS runners (id INTEGER PRIMARY KEY, expires_at INTEGER NOT NULL)");
    sql.exec("CREATE INDEX IF NOT EXISTS runners_expiry ON runners (expires_at)");
    sql.exec("CREATE TABLE IF NOT EXISTS grants (token TEXT PRIMARY KEY, runner INTEGER NOT NULL," +
      " granted_at INTEGER NOT NULL, expires_at INTEGER NOT NULL)");
    if (sql.exec("SELECT count(*) AS n FROM runners").one().n === 0) {
      for (let id = 1; id <= RUNNERS; id++) sql.exec("INSERT INTO runners (id, expires_at) VALUES (?, 0)", id);
    }
  }

  // The runner whose lease ran out first, if it has: its row and the grant are one turn.
  acquire() {
    const sql = this.ctx.storage.sql;
    const now = Date.now();
    const runner = sql.exec("UPDATE runners SET expires_at = ?1 WHERE id =" +
      " (SELECT id FROM runners WHERE expires_at <= ?2 ORDER BY expires_at LIMIT 1) RETURNING id",
      now + LEASE_MS, now).toArray()[0];
    if (!runner) return null;
    const token = crypto.randomUUID();
    sql.exec("INSERT INTO grants (token, runner, granted_at, expires_at) VALUES (?, ?, ?, ?)",
      token, runner.id, now, now + LEASE_MS);
    return { expiresAt: now + LEASE_MS, runner: runner.id, token };
  }
}

export default {
  async fetch(request, env) {
    const path = new URL(request.url).pathname;
    let m = path.match(/^\/counter\/([^/]+)$/);
    if (m && request.method === "GET") {
      return Response.json({ n: await env.COUNTER.getByName(m[1]).hit() });
    }
    m = path.match(/^\/touch\/(\d+)$/);
    if (m && request.method === "GET") {
      return Response.json({ n: await env.COUNTER.getByName("touch-" + m[1]).hit() });
    }
    if (path === "/lease/acquire" && request.method === "POST") {
      const lease = await env.POOL.getByName("pool").acquire();
      if (!lease) return new Response("no free runner\n", { status: 409 });
      return Response.json(lease);
    }
    return new Response("not found\n", { status: 404 });
  },
};
